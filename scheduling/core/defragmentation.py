"""Defragmentation plans: requeue small checkpointable jobs off the cheapest partly used nodes until a gang fits one
domain. Beside preemption.py: a plan of victims like a preemption's (they resume from their last checkpoint
elsewhere), which the explainer offers as a fix; the cycle never runs it by itself."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.core.model import FLEET, Job, PendingReason, PreemptionPlan, Victim
from scheduling.core.placement import FleetState
from scheduling.core.preemption import displacement_cost_gpu_hours

MAX_DEFRAG_DOMAINS = 8
"""Domains tried, roomiest first."""


@dataclass(frozen=True, slots=True)
class DefragmentationPlan:
    plan: PreemptionPlan
    """The moved jobs as victims, in the order the planner moved them (their cost is the plan's)."""
    moved: tuple[Job, ...]
    """The same jobs, by id."""
    nodes: tuple[str, ...]
    """The partly used nodes the moves free whole."""


def is_movable(job: Job, fleet: FleetState) -> bool:
    """Small (no pod fills a node), checkpointing and preemptible: it can resume elsewhere cheaply."""
    if not job.is_preemptible or not job.checkpoint_interval_s:
        return False
    width = max(fleet.class_width) if fleet.class_width else 0
    return all(ps.gpus_per_pod < width for ps in job.pod_sets)


def plan_defragmentation(job: Job, fleet: FleetState, jobs_on_node: list[list[Job]], *, now: float,
                         restart_overhead_s: float) -> DefragmentationPlan | None:
    """The cheapest moves (then the fewest) that let `job` fit one domain of its required level, with room left for
    the moved jobs outside the freed nodes; None when no domain of the roomiest MAX_DEFRAG_DOMAINS can be freed.
    `fleet` is left as it was."""
    classes = fleet.tolerated_classes(job)
    level = job.topology.required or FLEET
    domains = sorted(
        (d for d in fleet.domains.get(level, ()) if fleet.free_gpus_in(d, classes) >= job.gpus),
        key=lambda d: (-fleet.free_gpus_in(d, classes), d.key),
    )[:MAX_DEFRAG_DOMAINS]
    best = None
    for domain in domains:
        found = _domain_plan(job, domain, classes, fleet, jobs_on_node, now, restart_overhead_s)
        if found is not None and (best is None or (found[0], len(found[1])) < (best[0], len(best[1]))):
            best = (*found, domain.key)
    if best is None:
        return None
    _, moved, freed, domain_key = best
    victims = tuple(Victim(j.id, j.queue, j.team, j.gpus, displacement_cost_gpu_hours(j, now, restart_overhead_s)) for j in moved)
    plan = PreemptionPlan(job.id, victims, domain_key, PendingReason.FIT)
    return DefragmentationPlan(plan, tuple(sorted(moved, key=lambda j: j.id)), tuple(freed))


def _domain_plan(job, domain, classes, fleet: FleetState, by_node, now, overhead):
    """(cost, moved jobs in the order moved, freed node names) for one domain, or None."""
    options = []
    for i in domain.node_indices:
        if not fleet.is_eligible(i, classes) or fleet.is_whole_free(i):
            continue
        jobs = by_node[i]
        if not jobs or not all(is_movable(j, fleet) for j in jobs):
            continue
        cost = sum(displacement_cost_gpu_hours(j, now, overhead) for j in jobs)
        options.append((cost, fleet.nodes[i].name, i, jobs))
    options.sort(key=lambda o: (o[0], o[1]))
    moved: dict[int, Job] = {}
    freed: list[str] = []
    released: list[Job] = []
    try:
        for cost, name, i, jobs in options:
            for j in jobs:
                if j.id not in moved:
                    moved[j.id] = j
                    fleet.release_placement(j.placement, j)
                    released.append(j)
            freed.append(name)
            if fleet.fits(job, within=domain):
                # The moved jobs must fit back outside the freed nodes: count the free GPUs left elsewhere.
                moved_gpus = sum(j.gpus for j in moved.values())
                free_elsewhere = sum(
                    max(0, fleet.free[k]) for k in range(len(fleet.nodes))
                    if fleet.is_eligible(k, classes) and k not in domain.node_indices
                ) + max(0, fleet.free_gpus_in(domain, classes) - job.gpus)
                if moved_gpus > free_elsewhere:
                    return None
                total = sum(displacement_cost_gpu_hours(j, now, overhead) for j in moved.values())
                return total, list(moved.values()), freed
        return None
    finally:
        for j in released:
            fleet.allocate_placement(j.placement, j)
