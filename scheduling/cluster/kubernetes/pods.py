"""Pods as Gangway sees them: GPUs held by pods it does not manage, and the readiness of a gang's pods."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from .names import (
    ADMISSION_GATE, COMPLETION_INDEX_ANNOTATION, COMPLETION_INDEX_LABEL, GENERATION_ANNOTATION, GPU_RESOURCE,
    HOSTNAME_LABEL, MANAGED_LABEL, QUEUE_LABEL,
)
from .nodes import parse_quantity

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _container_gpus(container: Mapping) -> int:
    resources = container.get("resources") or {}
    # Extended resources must have requests == limits; either may be the one written down.
    return max(
        parse_quantity((resources.get("limits") or {}).get(GPU_RESOURCE)),
        parse_quantity((resources.get("requests") or {}).get(GPU_RESOURCE)),
    )


def pod_spec_gpus(spec: Mapping) -> int:
    """GPUs a pod spec holds: its containers together, or its largest init container if larger."""
    containers = sum(_container_gpus(container) for container in spec.get("containers") or ())
    init = max((_container_gpus(container) for container in spec.get("initContainers") or ()), default=0)
    return max(containers, init)


def pod_gpus(pod: Mapping) -> int:
    return pod_spec_gpus(pod.get("spec") or {})


def is_terminating(pod: Mapping) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_finished(pod: Mapping) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_managed(pod: Mapping, managed_job_uids: frozenset[str] = frozenset()) -> bool:
    """Ours if marked at release, still gated by us, labelled with a queue, or owned by a managed Job."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if MANAGED_LABEL in labels or QUEUE_LABEL in labels or is_gated(pod):
        return True
    return any(owner.get("uid") in managed_job_uids for owner in metadata.get("ownerReferences") or ())


def external_gpus_by_node(pods: Iterable[Mapping], managed_job_uids: frozenset[str] = frozenset()) -> dict[str, int]:
    """GPUs held on each node by bound, unfinished pods that Gangway does not manage."""
    held: Counter[str] = Counter()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or is_finished(pod) or is_managed(pod, managed_job_uids):
            continue
        gpus = pod_gpus(pod)
        if gpus:
            held[node] += gpus
    return dict(held)


def is_gated(pod: Mapping) -> bool:
    return any(gate.get("name") == ADMISSION_GATE for gate in (pod.get("spec") or {}).get("schedulingGates") or ())


def is_ready(pod: Mapping) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def completion_index(pod: Mapping) -> int | None:
    metadata = pod.get("metadata") or {}
    raw = (metadata.get("labels") or {}).get(COMPLETION_INDEX_LABEL)
    if raw is None:
        raw = (metadata.get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def admission_generation(pod: Mapping) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(GENERATION_ANNOTATION)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def pinned_node(pod: Mapping) -> str | None:
    return ((pod.get("spec") or {}).get("nodeSelector") or {}).get(HOSTNAME_LABEL)


def gang_pods(pods: Iterable[Mapping], *, job_uid: str | None, generation: int) -> dict[int, Mapping]:
    """The live pods of one admission of a gang by completion index; leftovers of older ones are ignored."""
    current: dict[int, Mapping] = {}
    for pod in pods:
        if is_terminating(pod) or admission_generation(pod) != generation:
            continue
        owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
        if job_uid and owners and not any(owner.get("uid") == job_uid for owner in owners):
            continue
        index = completion_index(pod)
        if index is not None:
            current[index] = pod
    return current


def ready_count(pods: Iterable[Mapping]) -> int:
    return sum(1 for pod in pods if is_ready(pod))
