"""Why a gang does not fit, in one sentence with the numbers: the one author of the fit message, for the cycle's
verdict (core.cycle) and the explanation's fit level (core.explain.diagnosis) alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.core.model import Job
from scheduling.core.placement import FleetState


@dataclass(frozen=True, slots=True)
class FreeCapacity:
    """The free GPUs of the nodes a job may use (schedulable, of its flavor, tolerated), counted in one pass."""

    usable_nodes: int
    free_gpus: int
    whole_free_nodes: int
    scattered_gpus: int
    """Free GPUs on partly used nodes."""
    partly_used_nodes: int
    node_gpus: int
    """A whole node's GPUs: the largest usable node's allocatable, else the largest capacity of the flavor."""

    def whole_nodes_needed(self, job: Job) -> int:
        """The gang's pods that each take a whole node."""
        return sum(pod_set.count for pod_set in job.pod_sets if self.node_gpus and pod_set.gpus_per_pod >= self.node_gpus)


def free_capacity(job: Job, fleet: FleetState) -> FreeCapacity:
    # One pass over the nodes: a cycle counts this for every shape that does not fit.
    classes = set(fleet.tolerated_classes(job))
    is_schedulable, node_class, free_by_node = fleet.is_schedulable, fleet.node_class, fleet.free
    usable = free_gpus = whole = whole_gpus = partly = node_gpus = 0
    for i, node in enumerate(fleet.nodes):
        if not is_schedulable[i] or node_class[i] not in classes:
            continue
        usable += 1
        allocatable = node.allocatable_gpus
        if allocatable > node_gpus:
            node_gpus = allocatable
        free = free_by_node[i]
        if free <= 0:
            continue
        free_gpus += free
        if free == allocatable:
            whole += 1
            whole_gpus += free
        else:
            partly += 1
    if not node_gpus:
        node_gpus = max((node.capacity_gpus for node in fleet.nodes if node.flavor == job.flavor), default=0)
    return FreeCapacity(usable, free_gpus, whole, free_gpus - whole_gpus, partly, node_gpus)


def fit_message(
    job: Job,
    free: FreeCapacity,
    *,
    is_fragmented: bool,
    largest_domain: tuple[str, int, int] | None = None,
    racks: Sequence[tuple[str, int]] = (),
) -> str:
    """`largest_domain`: (key, free GPUs, whole free nodes) of the roomiest domain at the job's required level;
    `racks`: the finest domains holding the most scattered GPUs, (key, GPUs). The cycle leaves both out."""
    level = job.topology.required
    where = f" inside one {level}" if level else ""
    parts = [f"needs {job.gpus} {job.flavor} GPUs{where}"]
    whole_needed = free.whole_nodes_needed(job)
    if whole_needed:
        parts.append(f"{whole_needed} whole nodes")
    message = (f"{' in '.join(parts)}; {free.free_gpus} free on {free.usable_nodes} usable nodes, "
               f"{free.whole_free_nodes} whole nodes free")
    if largest_domain is not None:
        key, domain_free, domain_whole = largest_domain
        message += f"; the largest {level} ({key}) has {domain_free} free, {domain_whole} whole nodes"
    if is_fragmented:
        where_racks = ", ".join(f"{key} {gpus}" for key, gpus in racks[:5])
        message += (f" — fragmentation: {free.scattered_gpus} GPUs scattered over {free.partly_used_nodes} partly used nodes"
                    + (f" ({where_racks})" if where_racks else ""))
    return message


def fit_failure_message(job: Job, fleet: FleetState) -> str:
    """The cycle's message for a gang placement just refused: fragmented when enough GPUs are free in all."""
    free = free_capacity(job, fleet)
    return fit_message(job, free, is_fragmented=free.free_gpus >= job.gpus)
