"""The PyTorchJob kind (kubeflow.org/v1, Kubeflow Training Operator): Master and Worker replica specs are
the pod sets, suspended through `runPolicy.suspend`; the operator creates one pod per replica."""

from __future__ import annotations

from typing import Mapping

from scheduling.cluster.base import DiscoveredWorkload, WorkloadPhase

from ..config import KubernetesSettings
from ..names import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from . import common

KIND, GROUP, VERSION, RESOURCE = "PyTorchJob", "kubeflow.org", "v1", "pytorchjobs"

_ORDER = {"Master": 0, "Worker": 1}
"""Master first, then Worker, then any other replica type by name."""


def _replica_specs(job: Mapping) -> list[tuple[str, Mapping]]:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return sorted(specs.items(), key=lambda item: (_ORDER.get(item[0], 2), item[0]))


def _replicas(replica_spec: Mapping) -> int:
    replicas = replica_spec.get("replicas")
    return 1 if replicas is None else int(replicas)


def _pod_set(replica_type: str) -> str:
    # The operator labels pods with the replica type lower-cased; the pod set is named the same.
    return replica_type.lower()


def is_suspended(job: Mapping) -> bool:
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def pod_sets(job: Mapping) -> dict[str, int]:
    return {_pod_set(rtype): _replicas(spec) for rtype, spec in _replica_specs(job)}


def discover(job: Mapping, settings: KubernetesSettings) -> DiscoveredWorkload | None:
    if not common.queue_of(job) or not is_suspended(job):
        return None
    if (job.get("spec") or {}).get("elasticPolicy"):
        common.log.warning("pytorchjob %s/%s has a queue label but an elasticPolicy: a gang has a fixed size; not managed",
                           *common.key(job))
        return None
    roles = [(_pod_set(rtype), _replicas(spec), (spec.get("template") or {}).get("spec") or {}) for rtype, spec in _replica_specs(job)]
    return common.workload_of(job, kind=KIND, roles=roles, settings=settings)


def release_patch(job: Mapping, generation: int) -> dict:
    # pytorchReplicaSpecs is a map: a merge patch reaches each replica type's template.
    return {"spec": {
        "runPolicy": {"suspend": False},
        "pytorchReplicaSpecs": {
            rtype: {"template": common.template_stamp_patch(spec.get("template") or {}, generation)}
            for rtype, spec in _replica_specs(job)
        },
    }}


def evict_patch(job: Mapping) -> dict | None:
    return None if is_suspended(job) else {"spec": {"runPolicy": {"suspend": True}}}


def owner_of(pod: Mapping) -> str | None:
    return common.owner_named(pod, kind=KIND)


def gang_key(pod: Mapping, job: Mapping) -> tuple[str, int] | None:
    if not any(owner.get("uid") == common.uid(job) for owner in common.meta(pod).get("ownerReferences") or ()):
        return None
    pod_labels = common.labels(pod)
    try:
        index = int(pod_labels.get(REPLICA_INDEX_LABEL, ""))
    except ValueError:
        return None
    role = pod_labels.get(REPLICA_TYPE_LABEL)
    return None if role not in pod_sets(job) else (role, index)


def finished_phase(job: Mapping) -> WorkloadPhase | None:
    return common.finished_phase(job, succeeded="Succeeded")


def placement_of(job: Mapping) -> dict[tuple[str, int], str]:
    return common.placement_of(job)
