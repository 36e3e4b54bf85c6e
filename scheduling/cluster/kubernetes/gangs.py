"""Release, pinning, eviction and status of a gang, the same for every workload kind.

Release: one patch of the suspended workload unsuspends it, stamps this admission's generation on its
pod templates and records the placement. Its controller(s) then create the gated pods; each is pinned
to its node (a gated pod's nodeSelector may still grow), and only when every pod of every pod set
exists and is pinned are all the gates removed, together. Eviction suspends the workload; its
controller deletes the pods.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from scheduling.cluster.base import ClusterError, GangRelease, WorkloadPhase, WorkloadRef, WorkloadStatus

from . import pods as pod_util
from .api import KubeApi, ResourceRef
from .kinds import ALL, WorkloadKind, kind_named
from .kinds.common import generation_of, key, meta, placement_annotation
from .names import (
    ADMISSION_GATE, GENERATION_ANNOTATION, HOSTNAME_LABEL, JOB_ID_ANNOTATION, MANAGED_LABEL, PLACEMENT_ANNOTATION, QUEUE_LABELS,
)

log = logging.getLogger(__name__)


def resource_of(kind: WorkloadKind) -> ResourceRef:
    return ResourceRef(kind.GROUP, kind.VERSION, kind.RESOURCE)


def _what(kind: WorkloadKind, namespace: str, name: str) -> str:
    return f"{kind.KIND} {namespace}/{name}"


# --- listing -----------------------------------------------------------------------------------


class AbsentKinds:
    """Kinds whose resource the API does not serve (CRD not installed): logged once, then skipped quietly."""

    def __init__(self) -> None:
        self.absent: set[str] = set()

    def note(self, kind: WorkloadKind, exc: ClusterError) -> bool:
        """True (and one log line the first time) when `exc` says the kind's resource is not served."""
        if exc.status != 404:
            return False
        if kind.KIND not in self.absent:
            self.absent.add(kind.KIND)
            log.info("%s (%s) is not served by this cluster (CRD not installed?): not managing %ss",
                     kind.KIND, resource_of(kind), kind.KIND)
        return True

    def served(self, kind: WorkloadKind) -> None:
        if kind.KIND in self.absent:
            self.absent.discard(kind.KIND)
            log.info("%s (%s) is now served: managing %ss", kind.KIND, resource_of(kind), kind.KIND)


def list_labelled(api: KubeApi, kind: WorkloadKind, absent: AbsentKinds, namespace: str | None = None) -> list[dict]:
    """Every object of `kind` carrying a queue label (Gangway's or Kueue's), each once."""
    found: dict[tuple[str, str], dict] = {}
    try:
        for label in QUEUE_LABELS:
            items, _ = api.list_objects(resource_of(kind), label_selector=label, namespace=namespace)
            for item in items:
                found.setdefault(key(item), item)
    except ClusterError as exc:
        if absent.note(kind, exc):
            return []
        raise
    absent.served(kind)
    return [found[k] for k in sorted(found)]


# --- release -----------------------------------------------------------------------------------


def _complete_placement(kind: WorkloadKind, obj: Mapping, release: GangRelease) -> dict[tuple[str, int], str]:
    placement = {(pod.pod_set, pod.index): pod.node for pod in release.placement}
    expected = kind.pod_sets(obj)
    missing = {
        pod_set: sorted(set(range(count)) - {i for (ps, i) in placement if ps == pod_set})
        for pod_set, count in expected.items()
    }
    missing = {pod_set: indexes for pod_set, indexes in missing.items() if indexes}
    if missing:
        # Never release part of a gang: the pods without a node would wait gated forever.
        described = "; ".join(f"pod set {ps!r} indexes {indexes}" for ps, indexes in sorted(missing.items()))
        if set(expected) == {"main"}:
            described = f"completion indexes {missing['main']}"
        raise ClusterError(f"{_what(kind, release.workload.namespace, release.workload.name)}: placement has no node for {described}")
    return placement


def release_patch(kind: WorkloadKind, obj: Mapping, release: GangRelease) -> dict | None:
    """The patch that releases `obj` for this admission, or None when it was already applied."""
    current, wanted = generation_of(obj), release.workload.generation
    if current >= wanted:
        # Applied already (perhaps by a worker that crashed before recording it), or superseded.
        return None
    ref = release.workload
    if not kind.is_suspended(obj):
        raise ClusterError(f"{_what(kind, ref.namespace, ref.name)} still runs admission {current}; "
                           f"suspend it before releasing admission {wanted}")
    placement = _complete_placement(kind, obj, release)
    patch = kind.release_patch(obj, wanted)
    patch["metadata"] = {
        "resourceVersion": meta(obj).get("resourceVersion"),
        "annotations": {
            GENERATION_ANNOTATION: str(wanted),
            PLACEMENT_ANNOTATION: placement_annotation(placement),
            JOB_ID_ANNOTATION: str(ref.job_id),
        },
    }
    return patch


def release(api: KubeApi, release: GangRelease) -> None:
    ref = release.workload
    kind = kind_named(ref.kind)

    def attempt() -> None:
        obj = api.get_object(resource_of(kind), ref.namespace, ref.name)
        if obj is None:
            raise ClusterError(f"{_what(kind, ref.namespace, ref.name)} (Gangway job {ref.job_id}) does not exist")
        patch = release_patch(kind, obj, release)
        if patch is not None:
            api.patch_object(resource_of(kind), ref.namespace, ref.name, patch)

    api.on_conflict_retry(f"release {_what(kind, ref.namespace, ref.name)}", attempt)
    # The pods may already exist when this is a replay; pin them now rather than wait for a pod event.
    pin(api, kind, ref.namespace, ref.name)


# --- pinning -----------------------------------------------------------------------------------


def gang_pods(kind: WorkloadKind, obj: Mapping, pods: Iterable[Mapping]) -> dict[tuple[str, int], Mapping]:
    """The live pods of `obj`'s current admission by (pod set, index); leftovers of older ones are ignored."""
    generation = generation_of(obj)
    gang: dict[tuple[str, int], Mapping] = {}
    for pod in pods:
        if pod_util.is_terminating(pod) or pod_util.admission_generation(pod) != generation:
            continue
        if (member := kind.gang_key(pod, obj)) is not None:
            gang[member] = pod
    return gang


def pin(api: KubeApi, kind: WorkloadKind, namespace: str, name: str) -> bool:
    """Pin the gang's gated pods to their nodes; ungate all of them once all exist. True when released."""
    return api.on_conflict_retry(f"pin pods of {_what(kind, namespace, name)}", lambda: _pin_once(api, kind, namespace, name))


def _pin_once(api: KubeApi, kind: WorkloadKind, namespace: str, name: str) -> bool:
    obj = api.get_object(resource_of(kind), namespace, name)
    if obj is None or kind.is_suspended(obj) or generation_of(obj) == 0:
        return False
    placement = kind.placement_of(obj)
    pods, _ = api.list_pods(label_selector=MANAGED_LABEL, namespace=namespace)
    gang = gang_pods(kind, obj, (pod for pod in pods if kind.owner_of(pod) == name))

    # 1. Pin: a gated pod's nodeSelector may still be extended, so each pod is bound to its node.
    for member, pod in sorted(gang.items()):
        node = placement.get(member)
        if node is None or not pod_util.is_gated(pod) or pod_util.pinned_node(pod) == node:
            continue
        gang[member] = api.patch_pod(namespace, pod["metadata"]["name"], {
            "metadata": {"resourceVersion": pod["metadata"].get("resourceVersion")},
            "spec": {"nodeSelector": {HOSTNAME_LABEL: node}},
        })

    # 2. Ungate only when every pod of every pod set exists and is pinned: a partly started gang holds GPUs idle.
    members = [(pod_set, i) for pod_set, count in sorted(kind.pod_sets(obj).items()) for i in range(count)]
    if any(member not in gang for member in members):
        return False
    if any(pod_util.is_gated(gang[m]) and pod_util.pinned_node(gang[m]) != placement.get(m) for m in members):
        return False
    for member in members:
        pod = gang[member]
        if not pod_util.is_gated(pod):
            continue
        remaining = [g for g in pod["spec"].get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
        api.patch_pod(namespace, pod["metadata"]["name"], {
            "metadata": {"resourceVersion": pod["metadata"].get("resourceVersion")},
            "spec": {"schedulingGates": remaining or None},
        })
    return True


def gang_of_pod(pod: Mapping) -> tuple[WorkloadKind, str, str] | None:
    """(kind, namespace, name) of the workload whose gang `pod` belongs to. The more specific kinds are
    asked first: a JobSet's pods are also owned by a (child) Job."""
    namespace = meta(pod).get("namespace", "")
    for kind in sorted(ALL, key=lambda k: k.KIND == "Job"):
        if (name := kind.owner_of(pod)) is not None:
            return kind, namespace, name
    return None


# --- eviction ----------------------------------------------------------------------------------


def suspend(api: KubeApi, ref: WorkloadRef) -> None:
    """Suspend the workload; its controller deletes the pods. A missing one is already as stopped as it gets."""
    kind = kind_named(ref.kind)

    def attempt() -> None:
        obj = api.get_object(resource_of(kind), ref.namespace, ref.name)
        patch = None if obj is None else kind.evict_patch(obj)
        if patch is None:
            return
        patch["metadata"] = {"resourceVersion": meta(obj).get("resourceVersion")}
        api.patch_object(resource_of(kind), ref.namespace, ref.name, patch)

    api.on_conflict_retry(f"suspend {_what(kind, ref.namespace, ref.name)}", attempt)


# --- status ------------------------------------------------------------------------------------


def status(kind: WorkloadKind, obj: Mapping | None, pods: Iterable[Mapping], job_id: int) -> WorkloadStatus:
    if obj is None:
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.MISSING)
    generation = generation_of(obj)
    finished = kind.finished_phase(obj)
    if finished is not None:
        return WorkloadStatus(job_id=job_id, phase=finished, generation=generation)
    if kind.is_suspended(obj):
        return WorkloadStatus(job_id=job_id, phase=WorkloadPhase.SUSPENDED)
    ready = pod_util.ready_count(gang_pods(kind, obj, pods).values())
    phase = WorkloadPhase.RUNNING if ready >= sum(kind.pod_sets(obj).values()) else WorkloadPhase.STARTING
    return WorkloadStatus(job_id=job_id, phase=phase, generation=generation, ready_pods=ready)


def statuses(api: KubeApi, refs: Sequence[WorkloadRef], absent: AbsentKinds) -> dict[int, WorkloadStatus]:
    """A few list calls whatever the number of workloads: the labelled objects of each kind asked about,
    and every managed pod."""
    if not refs:
        return {}
    by_kind: dict[str, list[WorkloadRef]] = defaultdict(list)
    for ref in refs:
        by_kind[kind_named(ref.kind).KIND].append(ref)
    pods, _ = api.list_pods(label_selector=MANAGED_LABEL)
    pods_by_gang: dict[tuple[str, str, str], list[Mapping]] = defaultdict(list)
    for pod in pods:
        if (gang := gang_of_pod(pod)) is not None:
            owner_kind, namespace, name = gang
            pods_by_gang[(owner_kind.KIND, namespace, name)].append(pod)
    result = {}
    for kind_name, kind_refs in by_kind.items():
        kind = kind_named(kind_name)
        objects = {key(obj): obj for obj in list_labelled(api, kind, absent)}
        for ref in kind_refs:
            obj = objects.get((ref.namespace, ref.name))
            owned = pods_by_gang.get((kind.KIND, ref.namespace, ref.name), []) if obj else []
            result[ref.job_id] = status(kind, obj, owned, ref.job_id)
    return result
