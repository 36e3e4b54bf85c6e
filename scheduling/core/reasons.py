"""Human messages for pending reasons, built from the numbers of the fleet state."""

from __future__ import annotations

from scheduling.core.model import Job
from scheduling.core.placement import FleetState


def fit_failure_message(job: Job, fleet: FleetState) -> str:
    """Why no domain holds the gang: free GPUs in total, whole nodes, and where the free GPUs sit."""
    classes = fleet.tolerated_classes(job)
    eligible = [i for i in range(len(fleet.nodes)) if fleet.is_eligible(i, classes)]
    free_gpus = sum(max(0, fleet.free[i]) for i in eligible)
    whole = sum(1 for i in eligible if fleet.is_whole_free(i))
    partial_nodes = sum(1 for i in eligible if 0 < fleet.free[i] and not fleet.is_whole_free(i))
    partial_gpus = free_gpus - sum(fleet.free[i] for i in eligible if fleet.is_whole_free(i))
    largest_pod = max(ps.gpus_per_pod for ps in job.pod_sets)
    where = f" inside one {job.topology.required}" if job.topology.required else ""
    if not eligible:
        return f"needs {job.gpus} {job.flavor} GPUs; no schedulable {job.flavor} node it tolerates"
    if free_gpus < job.gpus:
        return (
            f"needs {job.gpus} {job.flavor} GPUs{where}; only {free_gpus} free on "
            f"{len(eligible)} schedulable nodes"
        )
    return (
        f"needs {job.pods} pods × up to {largest_pod} {job.flavor} GPUs{where}; {free_gpus} GPUs free "
        f"but {whole} whole free nodes and {partial_gpus} GPUs scattered over {partial_nodes} partly used "
        f"nodes (fragmentation)"
    )
