"""Drains for under-served teams' gangs (SchedulerConfig.drain_for_underserved_gangs, an admin's option).

A gang its team's nominal quota holds can still wait far longer than it would on the team's own nodes: while other
teams' borrowing pods keep every node partly used, no set of whole nodes ever comes free, and without checkpoints
taking them back would throw their runs away. A drain picks the nodes the gang would need (the ones with the most
free GPUs) and keeps jobs that would borrow off them until the gang starts; jobs within their own quota still go
anywhere, so no team loses what it owns.

A drain idles the GPUs it holds, so it is given to one gang at a time, and only to a team that has used less than
UNDERSERVED_SHARE of the average team's share of the fleet (decayed usage per nominal GPU, core.accounts): on the
policy suite a drain for every owed gang made the overloaded synthetic trace's waits 7 % longer, where every team
gets its share anyway (docs/simulation.md). For the same reason it holds the nodes that should empty soonest (their
longest current run the shortest, core.payoff's estimate), and none when even those should take longer than
DRAIN_WITHIN_S: on Philly the nodes with the most free GPUs were often held for days by one long run, and every GPU
idle there lengthened everybody's wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduling.core.accounts import FairShareAccounts
from scheduling.core.defragmentation import longest_run_s
from scheduling.core.model import Job, Queue
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger
from scheduling.core.queue_stops import is_backing_off

UNDERSERVED_SHARE = 0.5
"""A team below this fraction of the average decayed usage per nominal GPU is under-served."""
DRAIN_WITHIN_S = 6 * 3600.0
"""No drain holds nodes expected to take longer than this to empty (measured on Philly: docs/simulation.md)."""
GANGS_LOOKED_AT = 64
"""Pending jobs of each queue, in its order, searched for the gang to drain for: bounds the cost of the search over
100,000 pending jobs; a gang further back is not next anyway."""


@dataclass(frozen=True, slots=True)
class Drain:
    job: Job
    """The gang the nodes drain for."""
    nodes: tuple[int, ...]
    """Node indices of the fleet state that jobs which would borrow keep off."""


def underserved_teams(queues: Mapping[str, Queue], usage: Mapping[str, float]) -> set[str]:
    accounts = FairShareAccounts(queues, usage)
    entitled = sum(accounts.entitlement.values())
    if not entitled:
        return set()
    average = sum(accounts.history.values()) / entitled
    return {team for team in accounts.members if accounts.weighted_history(team) < UNDERSERVED_SHARE * average}


def is_owed_gang(job: Job, ledger: QuotaLedger, fleet: FleetState, now: float, fits_by_shape: dict[tuple, bool]) -> bool:
    """A gang (several pods, or one pod as wide as a whole node) that its queue's nominal quota holds without
    borrowing, and that no set of nodes holds now. `fits_by_shape`: the fleet's answers so far, by Job.shape."""
    if is_backing_off(job, now):
        return False
    classes = fleet.tolerated_classes(job)
    widest_node = max((fleet.class_width[c] for c in classes), default=0)
    if job.pods < 2 and job.gpus < widest_node:
        return False
    check = ledger.check(job)
    if not check.fits or check.is_borrowing:
        return False
    fits = fits_by_shape.get(job.shape)
    if fits is None:
        fits = fits_by_shape[job.shape] = fleet.fits(job)
    return not fits


def choose_drain(
    by_queue: Mapping[str, list[Job]], queues: Mapping[str, Queue], usage: Mapping[str, float],
    ledger: QuotaLedger, fleet: FleetState, jobs_on_node: list[list[Job]], now: float,
) -> Drain | None:
    """The longest-waiting owed gang of an under-served team, with the nodes to drain for it; None when there is none,
    or when its nodes should not empty within DRAIN_WITHIN_S.

    `by_queue`: each queue's pending jobs in the core's order; `jobs_on_node`: the jobs holding each node of `fleet`
    (core.defragmentation.jobs_on_nodes)."""
    underserved = underserved_teams(queues, usage)
    if not underserved:
        return None
    chosen: Job | None = None
    fits_by_shape: dict[tuple, bool] = {}
    for name, jobs in by_queue.items():
        queue = queues.get(name)
        if queue is None or queue.team not in underserved:
            continue
        for job in jobs[:GANGS_LOOKED_AT]:
            if is_owed_gang(job, ledger, fleet, now, fits_by_shape):
                if chosen is None or (job.submitted_at, job.id) < (chosen.submitted_at, chosen.id):
                    chosen = job
                break
    if chosen is None:
        return None
    nodes = _nodes_to_drain(chosen, fleet, jobs_on_node, now)
    return Drain(chosen, nodes) if nodes else None


def _nodes_to_drain(job: Job, fleet: FleetState, jobs_on_node: list[list[Job]], now: float) -> tuple[int, ...]:
    """As many nodes as the gang has pods, those expected to empty soonest (then the ones with the most free GPUs),
    inside the domain of the level the gang requires, if any, where they should all be empty soonest (then the
    roomiest); none when that is later than DRAIN_WITHIN_S from now."""
    classes = fleet.tolerated_classes(job)
    required = job.topology.required
    if required and required in fleet.domains:
        groups = [domain.node_indices for domain in fleet.domains[required]]
    else:
        groups = [range(len(fleet.nodes))]

    def empties_in(i: int) -> float:
        return longest_run_s(jobs_on_node[i], now)

    best: list[int] = []
    best_key = (DRAIN_WITHIN_S, 1)
    for group in groups:
        eligible = sorted((i for i in group if fleet.is_eligible(i, classes)), key=lambda i: (empties_in(i), -fleet.free[i], i))
        picked = eligible[: job.pods]
        if len(picked) < job.pods:
            continue
        key = (max(map(empties_in, picked)), -sum(max(fleet.free[i], 0) for i in picked))
        if key < best_key:
            best, best_key = picked, key
    return tuple(sorted(best))


def kept_off_drain(drain: Drain, fleet: FleetState) -> str:
    """Why a job that would borrow waits although it fits: the cycle's verdict (PendingReason.ORDER)."""
    nodes = ", ".join(fleet.nodes[i].name for i in drain.nodes)
    gang = drain.job
    return (f"would borrow, and the nodes it fits on ({nodes}) are draining for gang {gang.id} of team {gang.team}, "
            f"which its team's quota holds: the team has used less than half the average share")
