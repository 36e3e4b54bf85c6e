"""Defragmentation plans: requeue small checkpointable jobs off the cheapest partly used nodes until a gang fits one
domain. Beside preemption.py: a plan of victims like a preemption's (they resume from their last checkpoint
elsewhere), which the explainer offers as a fix.

With SchedulerConfig.defragment_for_owed_gangs (an admin's policy, off by default) the cycle runs one by itself for a
gang that its own nominal quota holds and that only fragmentation keeps out, when it pays: the moves lose at most a checkpoint interval and a restart
each, and the gang would otherwise wait until as many partly used nodes drain on their own (`natural_drain_s`).
Borrowing gangs get no moves: they would take capacity the other teams own from the other teams' small jobs, and on
the policy suite moving jobs for every gang made the small jobs of ITP cluster02 wait three times as long
(docs/simulation.md). Jobs without checkpoints are not moved: each move would lose a whole run."""

from __future__ import annotations

import math
from collections.abc import Iterable
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


def jobs_on_nodes(holding: Iterable[Job], fleet: FleetState) -> list[list[Job]]:
    """The jobs holding GPUs on each node of `fleet` (by node index; a gang once per node it uses)."""
    by_node: list[list[Job]] = [[] for _ in fleet.nodes]
    index_of = fleet.index_of
    for job in holding:
        for i in {index_of[p.node] for p in job.placement if p.node in index_of}:
            by_node[i].append(job)
    return by_node


def longest_run_s(jobs: Iterable[Job], now: float) -> float:
    """How long a node holding `jobs` takes to empty on its own, each job taken to run as long again as it has run
    (core.payoff's estimate): its longest current run (0 for none)."""
    return max((now - j.started_at for j in jobs if j.started_at is not None), default=0.0)


def nodes_emptied(moved: Iterable[Job]) -> int:
    """The nodes a defragmentation plan empties: it moves every job off each node it takes."""
    return len({pod.node for job in moved for pod in job.placement})


def natural_drain_s(fleet: FleetState, jobs_on_node: list[list[Job]], classes: Iterable[int], nodes: int,
                    now: float) -> float:
    """How long until `nodes` more of the partly used nodes of these classes empty on their own, each holder taken to run
    as long again as it has run (core.payoff's estimate): a node empties when its longest-running job ends, so the
    nodes' longest runs in ascending order, the `nodes`-th (inf: not that many)."""
    classes = tuple(classes)
    drains = sorted(
        longest_run_s(jobs, now)
        for i, jobs in enumerate(jobs_on_node)
        if jobs and fleet.is_eligible(i, classes) and not fleet.is_whole_free(i)
    )
    return drains[nodes - 1] if 0 < nodes <= len(drains) else (0.0 if nodes <= 0 else math.inf)


def moves_pay(plan: PreemptionPlan, job: Job, natural_drain: float, margin: float) -> bool:
    """The gang's GPUs × the drain it is spared exceed `margin` × what the moves lose (core.payoff's rule)."""
    return margin * plan.cost_gpu_hours < job.gpus * natural_drain / 3600.0


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
