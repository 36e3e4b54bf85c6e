"""Translation of Kubernetes Node objects into the core's Node: GPUs, flavor, topology, health."""

from __future__ import annotations

from typing import Mapping

from scheduling.core.model import Node, Taint

from .config import KubernetesSettings
from .names import GPU_RESOURCE

UNKNOWN_FLAVOR = "unknown"


def parse_quantity(value: object) -> int:
    """Whole units of a countable resource ("8", 8, "8.0"); anything unparsable counts as 0."""
    if value is None:
        return 0
    try:
        return int(float(str(value)))
    except ValueError:
        return 0


def is_gpu_node(obj: Mapping, settings: KubernetesSettings) -> bool:
    """A node with GPU capacity, or labelled with a flavor (its device plugin may be down: capacity 0)."""
    status = obj.get("status") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return parse_quantity((status.get("capacity") or {}).get(GPU_RESOURCE)) > 0 or settings.flavor_label in labels


def _is_ready(status: Mapping) -> bool:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_from_object(obj: Mapping, settings: KubernetesSettings, *, external_gpus: int = 0) -> Node:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = metadata.get("labels") or {}
    # Only the labels the core reads are kept: the snapshot of 1,250 nodes stays small.
    kept = {key: labels[key] for key in (*settings.topology_labels, settings.flavor_label) if key in labels}
    return Node(
        name=metadata["name"],
        flavor=labels.get(settings.flavor_label) or UNKNOWN_FLAVOR,
        capacity_gpus=parse_quantity((status.get("capacity") or {}).get(GPU_RESOURCE)),
        allocatable_gpus=parse_quantity((status.get("allocatable") or {}).get(GPU_RESOURCE)),
        labels=kept,
        taints=tuple(
            Taint(key=taint.get("key", ""), value=taint.get("value") or "", effect=taint.get("effect") or "NoSchedule")
            for taint in spec.get("taints") or ()
        ),
        is_ready=_is_ready(status),
        is_cordoned=bool(spec.get("unschedulable")),
        external_gpus=external_gpus,
    )


def nodes_from_objects(
    objects: list[Mapping], settings: KubernetesSettings, external_gpus: Mapping[str, int] | None = None
) -> list[Node]:
    """GPU nodes only, sorted by name so snapshots compare equal when nothing changed."""
    external_gpus = external_gpus or {}
    nodes = [
        node_from_object(obj, settings, external_gpus=external_gpus.get(obj["metadata"]["name"], 0))
        for obj in objects
        if is_gpu_node(obj, settings)
    ]
    return sorted(nodes, key=lambda node: node.name)
