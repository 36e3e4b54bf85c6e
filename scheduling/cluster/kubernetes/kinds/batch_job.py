"""The batch/v1 Job kind: discovery, release and pod pinning, suspension, status, and creation."""

from __future__ import annotations

import copy
import json
import logging
from collections import defaultdict
from datetime import datetime
from typing import Iterable, Mapping, Sequence

from scheduling.cluster.base import DiscoveredWorkload, GangRelease, WorkloadPhase, WorkloadRef, WorkloadStatus
from scheduling.core.model import PodSet

from .. import pods as pod_util
from ..api import ClusterError, ConflictError, KubeApi
from ..config import KubernetesSettings
from ..names import (
    ADMISSION_GATE, CHECKPOINT_INTERVAL_ANNOTATION, FLAVOR_ANNOTATION, GENERATION_ANNOTATION, GPU_RESOURCE,
    HOSTNAME_LABEL, JOB_ID_ANNOTATION, JOB_NAME_LABEL, MANAGED_LABEL, PLACEMENT_ANNOTATION, PREEMPTIBLE_ANNOTATION,
    PRIORITY_ANNOTATION, QUEUE_LABEL, RUNTIME_LIMIT_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)

log = logging.getLogger(__name__)

POD_SET = "main"
"""A Job has one pod template, hence one pod set; Kueue names it the same."""


# --- reading a Job ------------------------------------------------------------------------------


def _meta(job: Mapping) -> Mapping:
    return job.get("metadata") or {}


def _annotations(job: Mapping) -> Mapping[str, str]:
    return _meta(job).get("annotations") or {}


def key(job: Mapping) -> tuple[str, str]:
    return _meta(job).get("namespace", ""), _meta(job)["name"]


def is_suspended(job: Mapping) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def pod_count(job: Mapping) -> int:
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    # The controller never runs more pods at once than there are completions left.
    return min(parallelism, int(completions)) if completions is not None else parallelism


def generation_of(job: Mapping) -> int:
    try:
        return int(_annotations(job).get(GENERATION_ANNOTATION) or 0)
    except ValueError:
        return 0


def placement_of(job: Mapping) -> dict[int, str]:
    """Completion index → node, as written at release."""
    raw = _annotations(job).get(PLACEMENT_ANNOTATION)
    if not raw:
        return {}
    try:
        return {int(index): node for index, node in json.loads(raw).items()}
    except (ValueError, AttributeError):
        log.warning("job %s/%s: unreadable %s annotation %r", *key(job), PLACEMENT_ANNOTATION, raw)
        return {}


def _condition(job: Mapping, kind: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _int_annotation(job: Mapping, name: str) -> int | None:
    raw = _annotations(job).get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        log.warning("job %s/%s: ignoring %s=%r (not an integer)", *key(job), name, raw)
        return None


def _bool_annotation(job: Mapping, name: str, default: bool) -> bool:
    raw = _annotations(job).get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    log.warning("job %s/%s: ignoring %s=%r (not a boolean)", *key(job), name, raw)
    return default


# --- discovery ----------------------------------------------------------------------------------


def discover(job: Mapping, settings: KubernetesSettings) -> DiscoveredWorkload | None:
    """A labelled, suspended, Indexed Job becomes a workload for Gangway; anything else is not ours."""
    queue = (_meta(job).get("labels") or {}).get(QUEUE_LABEL)
    spec = job.get("spec") or {}
    if not queue or not is_suspended(job):
        return None
    if spec.get("completionMode") != "Indexed":
        # Without completion indexes pods cannot be told apart, so they cannot be pinned one by one.
        log.warning("job %s/%s has %s but is not Indexed: not managed", *key(job), QUEUE_LABEL)
        return None
    template_spec = (spec.get("template") or {}).get("spec") or {}
    flavor = _annotations(job).get(FLAVOR_ANNOTATION) or (template_spec.get("nodeSelector") or {}).get(
        settings.flavor_label, ""
    )
    namespace, name = key(job)
    return DiscoveredWorkload(
        namespace=namespace,
        name=name,
        queue=queue,
        flavor=flavor,
        pod_sets=(PodSet(name=POD_SET, count=pod_count(job), gpus_per_pod=pod_util.pod_spec_gpus(template_spec)),),
        priority=_int_annotation(job, PRIORITY_ANNOTATION) or 0,
        topology_required=_annotations(job).get(TOPOLOGY_REQUIRED_ANNOTATION) or None,
        topology_preferred=_annotations(job).get(TOPOLOGY_PREFERRED_ANNOTATION) or None,
        runtime_limit_s=_int_annotation(job, RUNTIME_LIMIT_ANNOTATION),
        checkpoint_interval_s=_int_annotation(job, CHECKPOINT_INTERVAL_ANNOTATION),
        is_preemptible=_bool_annotation(job, PREEMPTIBLE_ANNOTATION, True),
        annotations={k: v for k, v in _annotations(job).items() if k.startswith("gangway.dev/")},
        tolerations=tuple(
            {"key": t.get("key") or "", "operator": t.get("operator") or "Equal", "value": t.get("value") or "", "effect": t.get("effect") or ""}
            for t in template_spec.get("tolerations") or ()
        ),
        created_at=_timestamp(_meta(job).get("creationTimestamp")),
    )


def _timestamp(value) -> float | None:
    """An RFC 3339 time from the API ("2026-12-03T08:00:00Z") as epoch seconds; None if absent or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def list_managed(api: KubeApi) -> list[dict]:
    jobs, _ = api.list_jobs(label_selector=QUEUE_LABEL)
    return jobs


# --- release and pinning ------------------------------------------------------------------------


def _placement_by_index(job: Mapping, release: GangRelease) -> dict[int, str]:
    placement = {pod.index: pod.node for pod in release.placement}
    missing = set(range(pod_count(job))) - set(placement)
    if missing:
        # Never release part of a gang: the pods without a node would wait gated forever.
        raise ClusterError(
            f"job {release.workload.namespace}/{release.workload.name}: placement has no node for "
            f"completion indexes {sorted(missing)}"
        )
    return placement


def release_patch(job: Mapping, release: GangRelease) -> dict | None:
    """The patch that unsuspends `job` for this admission, or None when it was already applied."""
    current = generation_of(job)
    wanted = release.workload.generation
    if current >= wanted:
        # Applied already (perhaps by a worker that crashed before recording it), or superseded.
        return None
    if not is_suspended(job):
        raise ClusterError(
            f"job {release.workload.namespace}/{release.workload.name} still runs admission {current}; "
            f"suspend it before releasing admission {wanted}"
        )
    placement = _placement_by_index(job, release)
    template = (job.get("spec") or {}).get("template") or {}
    gates = list((template.get("spec") or {}).get("schedulingGates") or ())
    template_patch: dict = {
        # Stamped on every pod, so leftovers of an earlier admission are never pinned or ungated.
        "metadata": {"annotations": {GENERATION_ANNOTATION: str(wanted)}, "labels": {MANAGED_LABEL: "true"}},
    }
    if not any(gate.get("name") == ADMISSION_GATE for gate in gates):
        # A user's Job without our gate would start its pods wherever the scheduler likes.
        template_patch["spec"] = {"schedulingGates": [*gates, {"name": ADMISSION_GATE}]}
    return {
        "metadata": {
            "resourceVersion": _meta(job).get("resourceVersion"),
            "annotations": {
                GENERATION_ANNOTATION: str(wanted),
                PLACEMENT_ANNOTATION: json.dumps({str(i): node for i, node in sorted(placement.items())}),
                JOB_ID_ANNOTATION: str(release.workload.job_id),
            },
        },
        "spec": {"suspend": False, "template": template_patch},
    }


def release(api: KubeApi, release: GangRelease) -> None:
    ref = release.workload

    def attempt() -> None:
        job = api.get_job(ref.namespace, ref.name)
        if job is None:
            raise ClusterError(f"job {ref.namespace}/{ref.name} (Gangway job {ref.job_id}) does not exist")
        patch = release_patch(job, release)
        if patch is not None:
            api.patch_job(ref.namespace, ref.name, patch)

    api.on_conflict_retry(f"release job {ref.namespace}/{ref.name}", attempt)
    # The pods may already exist when this is a replay; pin them now rather than wait for a pod event.
    pin(api, ref.namespace, ref.name)


def _job_uid(job: Mapping) -> str | None:
    return _meta(job).get("uid")


def pin(api: KubeApi, namespace: str, name: str) -> bool:
    """Pin the gang's gated pods to their nodes; ungate all of them once all exist. True when released."""
    return api.on_conflict_retry(f"pin pods of job {namespace}/{name}", lambda: _pin_once(api, namespace, name))


def _pin_once(api: KubeApi, namespace: str, name: str) -> bool:
    job = api.get_job(namespace, name)
    if job is None or is_suspended(job) or generation_of(job) == 0:
        return False
    generation = generation_of(job)
    placement = placement_of(job)
    pods, _ = api.list_pods(label_selector=f"{MANAGED_LABEL}", namespace=namespace)
    owned = [pod for pod in pods if _owned_by(pod, job)]
    gang = pod_util.gang_pods(owned, job_uid=_job_uid(job), generation=generation)

    # 1. Pin: a gated pod's nodeSelector may still be extended, so each pod is bound to its node.
    for index, pod in sorted(gang.items()):
        node = placement.get(index)
        if node is None or not pod_util.is_gated(pod) or pod_util.pinned_node(pod) == node:
            continue
        gang[index] = api.patch_pod(namespace, pod["metadata"]["name"], {
            "metadata": {"resourceVersion": pod["metadata"].get("resourceVersion")},
            "spec": {"nodeSelector": {HOSTNAME_LABEL: node}},
        })

    # 2. Ungate only when the whole gang exists and is pinned: a partly started gang holds GPUs idle.
    count = pod_count(job)
    if any(index not in gang for index in range(count)):
        return False
    if any(pod_util.is_gated(gang[i]) and pod_util.pinned_node(gang[i]) != placement.get(i) for i in range(count)):
        return False
    for index in range(count):
        pod = gang[index]
        if not pod_util.is_gated(pod):
            continue
        remaining = [g for g in pod["spec"].get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
        api.patch_pod(namespace, pod["metadata"]["name"], {
            "metadata": {"resourceVersion": pod["metadata"].get("resourceVersion")},
            "spec": {"schedulingGates": remaining or None},
        })
    return True


def _owned_by(pod: Mapping, job: Mapping) -> bool:
    metadata = pod.get("metadata") or {}
    owners = metadata.get("ownerReferences") or ()
    if owners:
        return any(owner.get("uid") == _job_uid(job) for owner in owners)
    # Without owner references (some fakes, some restores) fall back to the controller's label.
    return (metadata.get("labels") or {}).get(JOB_NAME_LABEL) == _meta(job)["name"]


# --- suspension ---------------------------------------------------------------------------------


def suspend(api: KubeApi, ref: WorkloadRef) -> None:
    """Suspend the Job; its controller deletes the pods. A missing Job is already as stopped as it gets."""

    def attempt() -> None:
        job = api.get_job(ref.namespace, ref.name)
        if job is None or is_suspended(job):
            return
        api.patch_job(ref.namespace, ref.name, {
            "metadata": {"resourceVersion": _meta(job).get("resourceVersion")},
            "spec": {"suspend": True},
        })

    api.on_conflict_retry(f"suspend job {ref.namespace}/{ref.name}", attempt)


# --- status -------------------------------------------------------------------------------------


def status(job: Mapping | None, pods: Iterable[Mapping], job_id: int) -> WorkloadStatus:
    if job is None:
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.MISSING)
    generation = generation_of(job)
    if _condition(job, "Complete"):
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.SUCCEEDED, generation=generation)
    if _condition(job, "Failed"):
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.FAILED, generation=generation)
    if is_suspended(job):
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.SUSPENDED)
    gang = pod_util.gang_pods(pods, job_uid=_job_uid(job), generation=generation)
    ready = pod_util.ready_count(gang.values())
    phase = WorkloadPhase.RUNNING if ready >= pod_count(job) else WorkloadPhase.STARTING
    return WorkloadStatus(job_id=job_id, phase=phase, generation=generation, ready_pods=ready)


def statuses(api: KubeApi, refs: Sequence[WorkloadRef]) -> dict[int, WorkloadStatus]:
    """Two list calls whatever the number of workloads: every managed Job, every managed pod."""
    if not refs:
        return {}
    jobs = {key(job): job for job in list_managed(api)}
    pods, _ = api.list_pods(label_selector=MANAGED_LABEL)
    pods_by_owner: dict[str, list[Mapping]] = defaultdict(list)
    for pod in pods:
        for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
            pods_by_owner[owner.get("uid")].append(pod)
    result = {}
    for ref in refs:
        job = jobs.get((ref.namespace, ref.name))
        owned = pods_by_owner.get(_job_uid(job), []) if job else []
        result[ref.job_id] = status(job, owned, ref.job_id)
    return result


# --- creation from a Gangway submission ---------------------------------------------------------


def build_job(
    *,
    namespace: str,
    name: str,
    queue: str,
    pod_template: Mapping,
    pod_sets: Sequence[PodSet],
    flavor: str | None,
    flavor_label: str,
    priority: int = 0,
    topology_required: str | None = None,
    topology_preferred: str | None = None,
    runtime_limit_s: int | None = None,
    checkpoint_interval_s: int | None = None,
    is_preemptible: bool = True,
    job_id: int | None = None,
    backoff_limit: int = 0,
) -> dict:
    """A suspended, gated, Indexed Job running `pod_template` as the gang described by `pod_sets`."""
    if len(pod_sets) != 1:
        raise ClusterError(f"a batch/v1 Job holds exactly one pod set, not {len(pod_sets)}")
    pod_set = pod_sets[0]
    template = copy.deepcopy(dict(pod_template))
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Never")
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
    spec["schedulingGates"] = [*gates, {"name": ADMISSION_GATE}]
    containers = spec.get("containers") or []
    if not containers:
        raise ClusterError(f"job {namespace}/{name}: the pod template has no containers")
    if pod_util.pod_spec_gpus(spec) != pod_set.gpus_per_pod:
        # The template is the truth the kubelet sees; make it agree with what Gangway accounts for.
        resources = containers[0].setdefault("resources", {})
        others = pod_util.pod_spec_gpus({"containers": containers[1:]})
        gpus = str(max(0, pod_set.gpus_per_pod - others))
        resources.setdefault("limits", {})[GPU_RESOURCE] = gpus
        resources.setdefault("requests", {})[GPU_RESOURCE] = gpus
    if flavor:
        spec.setdefault("nodeSelector", {})[flavor_label] = flavor
    annotations = {PRIORITY_ANNOTATION: str(priority), PREEMPTIBLE_ANNOTATION: str(is_preemptible).lower()}
    optional = {
        FLAVOR_ANNOTATION: flavor,
        TOPOLOGY_REQUIRED_ANNOTATION: topology_required,
        TOPOLOGY_PREFERRED_ANNOTATION: topology_preferred,
        RUNTIME_LIMIT_ANNOTATION: runtime_limit_s,
        CHECKPOINT_INTERVAL_ANNOTATION: checkpoint_interval_s,
        JOB_ID_ANNOTATION: job_id,
    }
    annotations.update({k: str(v) for k, v in optional.items() if v not in (None, "")})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}, "annotations": annotations},
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
        api.create_job(namespace, body)
    except ConflictError:
        existing = api.get_job(namespace, name)
        owner = _annotations(existing or {}).get(JOB_ID_ANNOTATION)
        if existing is None or job_id is None or owner != str(job_id):
            raise ClusterError(f"job {namespace}/{name} already exists and is not Gangway job {job_id}", status=409)
    return WorkloadRef(job_id=job_id or 0, generation=0, namespace=namespace, name=name)
