"""Human messages for pending reasons, built from the numbers of the fleet state."""

from __future__ import annotations

from scheduling.core.model import Job
from scheduling.core.placement import FleetState


def fit_failure_message(job: Job, fleet: FleetState) -> str:
    """Why no domain holds the gang: free GPUs in total, whole nodes, and where the free GPUs sit."""
    # One pass over the nodes: a cycle builds this message for every shape that does not fit.
    classes = set(fleet.tolerated_classes(job))
    eligible = free_gpus = whole = whole_gpus = partial_nodes = 0
    for i, node in enumerate(fleet.nodes):
        if not fleet.is_schedulable[i] or fleet.node_class[i] not in classes:
            continue
        eligible += 1
        free = fleet.free[i]
        if free <= 0:
            continue
        free_gpus += free
        if free == node.allocatable_gpus:
            whole += 1
            whole_gpus += free
        else:
            partial_nodes += 1
    partial_gpus = free_gpus - whole_gpus
    largest_pod = max(ps.gpus_per_pod for ps in job.pod_sets)
    where = f" inside one {job.topology.required}" if job.topology.required else ""
    if not eligible:
        return f"needs {job.gpus} {job.flavor} GPUs; no schedulable {job.flavor} node it tolerates"
    if free_gpus < job.gpus:
        return (
            f"needs {job.gpus} {job.flavor} GPUs{where}; only {free_gpus} free on "
            f"{eligible} schedulable nodes"
        )
    return (
        f"needs {job.pods} pods × up to {largest_pod} {job.flavor} GPUs{where}; {free_gpus} GPUs free "
        f"but {whole} whole free nodes and {partial_gpus} GPUs scattered over {partial_nodes} partly used "
        f"nodes (fragmentation)"
    )
