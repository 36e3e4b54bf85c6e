"""The batch/v1 Job kind: one Indexed Job is one pod set; and the Jobs Gangway creates for API submissions."""

from __future__ import annotations

import copy
from typing import Mapping

from scheduling.cluster.base import DiscoveredWorkload, WorkloadPhase, WorkloadRef, WorkloadSpec

from .. import pods as pod_util
from ..api import ClusterError, ConflictError, KubeApi, ResourceRef
from ..config import KubernetesSettings
from ..names import (
    ADMISSION_GATE, CHECKPOINT_INTERVAL_ANNOTATION, FLAVOR_ANNOTATION, GPU_RESOURCE, JOB_ID_ANNOTATION, JOB_NAME_LABEL,
    PREEMPTIBLE_ANNOTATION, PRIORITY_ANNOTATION, PRIORITY_CLASS_LABEL, QUEUE_LABEL, RUNTIME_LIMIT_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION,
)
from . import common

KIND, GROUP, VERSION, RESOURCE = "Job", "batch", "v1", "jobs"
RESOURCE_REF = ResourceRef(GROUP, VERSION, RESOURCE)

POD_SET = "main"
"""A Job has one pod template, hence one pod set; Kueue names it the same."""


def is_suspended(job: Mapping) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def job_pod_count(job_spec: Mapping) -> int:
    """Pods an (Indexed) Job runs at once: its parallelism, never more than its completions."""
    parallelism = job_spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = job_spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def pod_sets(job: Mapping) -> dict[str, int]:
    return {POD_SET: job_pod_count(job.get("spec") or {})}


def discover(job: Mapping, settings: KubernetesSettings) -> DiscoveredWorkload | None:
    """A labelled, suspended, Indexed Job becomes a workload for Gangway; anything else is not ours."""
    spec = job.get("spec") or {}
    if not common.queue_of(job) or not is_suspended(job):
        return None
    if spec.get("completionMode") != "Indexed":
        # Without completion indexes pods cannot be told apart, so they cannot be pinned one by one.
        common.log.warning("job %s/%s has a queue label but is not Indexed: not managed", *common.key(job))
        return None
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return common.workload_of(job, kind=KIND, roles=[(POD_SET, job_pod_count(spec), template_spec)], settings=settings)


def release_patch(job: Mapping, generation: int) -> dict:
    template = (job.get("spec") or {}).get("template") or {}
    return {"spec": {"suspend": False, "template": common.template_stamp_patch(template, generation)}}


def evict_patch(job: Mapping) -> dict | None:
    return None if is_suspended(job) else {"spec": {"suspend": True}}


def owner_of(pod: Mapping) -> str | None:
    return common.owner_named(pod, kind=KIND)


def gang_key(pod: Mapping, job: Mapping) -> tuple[str, int] | None:
    metadata = common.meta(pod)
    owners = metadata.get("ownerReferences") or ()
    if owners:
        if not any(owner.get("uid") == common.uid(job) for owner in owners):
            return None
    elif (metadata.get("labels") or {}).get(JOB_NAME_LABEL) != common.meta(job)["name"]:
        # Without owner references (some fakes, some restores) fall back to the controller's label.
        return None
    index = pod_util.completion_index(pod)
    return None if index is None else (POD_SET, index)


def finished_phase(job: Mapping) -> WorkloadPhase | None:
    return common.finished_phase(job, succeeded="Complete")


def placement_of(job: Mapping) -> dict[tuple[str, int], str]:
    return common.placement_of(job, single_pod_set=POD_SET)


# --- creation from a Gangway submission ---------------------------------------------------------


def build_job(*, namespace: str, name: str, spec: WorkloadSpec, pod_template: Mapping, flavor_label: str,
              job_id: int | None = None, backoff_limit: int = 0) -> dict:
    """A suspended, gated, Indexed Job running `pod_template` as the gang `spec` describes; its annotations carry the
    spec, so discovery reads the same gang back."""
    if len(spec.pod_sets) != 1:
        raise ClusterError(f"a batch/v1 Job holds exactly one pod set, not {len(spec.pod_sets)}")
    pod_set = spec.pod_sets[0]
    flavor = spec.flavor
    template = copy.deepcopy(dict(pod_template))
    template.setdefault("metadata", {})
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
    gates = [g for g in pod_spec.get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
    pod_spec["schedulingGates"] = [*gates, {"name": ADMISSION_GATE}]
    containers = pod_spec.get("containers") or []
    if not containers:
        raise ClusterError(f"job {namespace}/{name}: the pod template has no containers")
    if pod_util.pod_spec_gpus(pod_spec) != pod_set.gpus_per_pod:
        # The template is the truth the kubelet sees; make it agree with what Gangway accounts for.
        resources = containers[0].setdefault("resources", {})
        others = pod_util.pod_spec_gpus({"containers": containers[1:]})
        gpus = str(max(0, pod_set.gpus_per_pod - others))
        resources.setdefault("limits", {})[GPU_RESOURCE] = gpus
        resources.setdefault("requests", {})[GPU_RESOURCE] = gpus
    if flavor:
        pod_spec.setdefault("nodeSelector", {})[flavor_label] = flavor
    annotations = {PRIORITY_ANNOTATION: str(spec.priority), PREEMPTIBLE_ANNOTATION: str(spec.is_preemptible).lower()}
    optional = {
        FLAVOR_ANNOTATION: flavor,
        TOPOLOGY_REQUIRED_ANNOTATION: spec.topology_required,
        TOPOLOGY_PREFERRED_ANNOTATION: spec.topology_preferred,
        RUNTIME_LIMIT_ANNOTATION: spec.runtime_limit_s,
        CHECKPOINT_INTERVAL_ANNOTATION: spec.checkpoint_interval_s,
        JOB_ID_ANNOTATION: job_id,
    }
    annotations.update({k: str(v) for k, v in optional.items() if v not in (None, "")})
    labels = {QUEUE_LABEL: spec.queue, **({PRIORITY_CLASS_LABEL: spec.priority_class} if spec.priority_class else {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "parallelism": pod_set.count,
            "completions": pod_set.count,
            "backoffLimit": backoff_limit,
            "template": template,
        },
    }


def create(api: KubeApi, body: dict, *, job_id: int | None) -> WorkloadRef:
    """Create the Job; creating it again for the same Gangway job is a no-op (crash-safe)."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    try:
        api.create_object(RESOURCE_REF, namespace, body)
    except ConflictError:
        existing = api.get_object(RESOURCE_REF, namespace, name)
        owner = common.annotations(existing or {}).get(JOB_ID_ANNOTATION)
        if existing is None or job_id is None or owner != str(job_id):
            raise ClusterError(f"job {namespace}/{name} already exists and is not Gangway job {job_id}", status=409)
    return WorkloadRef(job_id=job_id or 0, generation=0, namespace=namespace, name=name)
