"""The JobSet kind (jobset.x-k8s.io/v1alpha2): one gang of several pod sets, one per replicated job.

A replicated job runs `replicas` child Jobs of `parallelism` pods each; its pods are told apart by the
child Job's index and their completion index. The JobSet controller copies the pod template's labels,
annotations, nodeSelector, tolerations and scheduling gates into its child Jobs when the JobSet is
resumed (they are mutable while it is suspended), so Gangway's stamps reach every pod of every child Job.
"""

from __future__ import annotations

import copy
from typing import Mapping

from scheduling.cluster.base import DiscoveredWorkload, WorkloadPhase

from .. import pods as pod_util
from ..config import KubernetesSettings
from ..names import JOBSET_JOB_INDEX_LABEL, JOBSET_NAME_LABEL, JOBSET_UID_LABEL, REPLICATED_JOB_LABEL
from . import common
from .batch_job import job_pod_count

KIND, GROUP, VERSION, RESOURCE = "JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets"


def _replicated_jobs(jobset: Mapping) -> list[Mapping]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or ())


def _job_spec(replicated_job: Mapping) -> Mapping:
    return (replicated_job.get("template") or {}).get("spec") or {}


def _replicas(replicated_job: Mapping) -> int:
    replicas = replicated_job.get("replicas")
    return 1 if replicas is None else int(replicas)


def is_suspended(jobset: Mapping) -> bool:
    return bool((jobset.get("spec") or {}).get("suspend"))


def pod_sets(jobset: Mapping) -> dict[str, int]:
    return {rj["name"]: _replicas(rj) * job_pod_count(_job_spec(rj)) for rj in _replicated_jobs(jobset)}


def discover(jobset: Mapping, settings: KubernetesSettings) -> DiscoveredWorkload | None:
    """A labelled, suspended JobSet whose child Jobs are Indexed (the JobSet default) is one gang."""
    if not common.queue_of(jobset) or not is_suspended(jobset):
        return None
    replicated = _replicated_jobs(jobset)
    if any(_job_spec(rj).get("completionMode", "Indexed") != "Indexed" for rj in replicated):
        common.log.warning("jobset %s/%s has a queue label but a replicated job that is not Indexed: not managed",
                           *common.key(jobset))
        return None
    roles = [(rj["name"], _replicas(rj) * job_pod_count(_job_spec(rj)), (_job_spec(rj).get("template") or {}).get("spec") or {})
             for rj in replicated]
    return common.workload_of(jobset, kind=KIND, roles=roles, settings=settings)


def release_patch(jobset: Mapping, generation: int) -> dict:
    # replicatedJobs is a list, which a merge patch replaces whole: send all of it, each template stamped.
    replicated = copy.deepcopy(_replicated_jobs(jobset))
    for rj in replicated:
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        job_spec["template"] = common.stamped_template(job_spec.get("template") or {}, generation)
    return {"spec": {"suspend": False, "replicatedJobs": replicated}}


def evict_patch(jobset: Mapping) -> dict | None:
    return None if is_suspended(jobset) else {"spec": {"suspend": True}}


def owner_of(pod: Mapping) -> str | None:
    return common.labels(pod).get(JOBSET_NAME_LABEL)


def gang_key(pod: Mapping, jobset: Mapping) -> tuple[str, int] | None:
    pod_labels = common.labels(pod)
    if pod_labels.get(JOBSET_NAME_LABEL) != common.meta(jobset)["name"]:
        return None
    if pod_labels.get(JOBSET_UID_LABEL) not in (None, common.uid(jobset)):
        return None  # a pod of an earlier JobSet of the same name
    per_job = {rj["name"]: job_pod_count(_job_spec(rj)) for rj in _replicated_jobs(jobset)}
    role = pod_labels.get(REPLICATED_JOB_LABEL)
    index = pod_util.completion_index(pod)
    try:
        job_index = int(pod_labels.get(JOBSET_JOB_INDEX_LABEL, ""))
    except ValueError:
        return None
    if role not in per_job or index is None:
        return None
    return role, job_index * per_job[role] + index


def finished_phase(jobset: Mapping) -> WorkloadPhase | None:
    return common.finished_phase(jobset, succeeded="Completed")


def placement_of(jobset: Mapping) -> dict[tuple[str, int], str]:
    return common.placement_of(jobset)
