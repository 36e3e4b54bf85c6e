"""Drains for under-served teams' gangs (SchedulerConfig.drain_for_underserved_gangs, an admin's option).

A gang its team's nominal quota holds can still wait far longer than it would on the team's own nodes: while other
teams' borrowing pods keep every node partly used, no set of whole nodes ever comes free, and without checkpoints
taking them back would throw their runs away. A drain picks the nodes the gang would need (the ones with the most
free GPUs) and keeps jobs that would borrow off them until the gang starts; jobs within their own quota still go
anywhere, so no team loses what it owns.

A drain idles the GPUs it holds, so it is given to one gang at a time, and only to a team that has used less than
UNDERSERVED_SHARE of the average team's share of the fleet (decayed usage per nominal GPU, core.accounts): on the
policy suite a drain for every owed gang made the overloaded synthetic trace's waits 7 % longer, where every team
gets its share anyway (docs/simulation.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduling.core.accounts import FairShareAccounts
from scheduling.core.model import Job, Queue
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger
from scheduling.core.queue_stops import is_backing_off

UNDERSERVED_SHARE = 0.5
"""A team below this fraction of the average decayed usage per nominal GPU is under-served."""
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


def is_owed_gang(job: Job, ledger: QuotaLedger, fleet: FleetState, now: float) -> bool:
    """A gang (several pods, or one pod as wide as a whole node) that its queue's nominal quota holds without
    borrowing, and that no set of nodes holds now."""
    if is_backing_off(job, now):
        return False
    classes = fleet.tolerated_classes(job)
    widest_node = max((fleet.class_width[c] for c in classes), default=0)
    if job.pods < 2 and job.gpus < widest_node:
        return False
    check = ledger.check(job)
    return check.fits and not check.is_borrowing and not fleet.fits(job)


def choose_drain(
    by_queue: Mapping[str, list[Job]], queues: Mapping[str, Queue], usage: Mapping[str, float],
    ledger: QuotaLedger, fleet: FleetState, now: float,
) -> Drain | None:
    """The longest-waiting owed gang of an under-served team, with the nodes to drain for it; None when there is none.

    `by_queue`: each queue's pending jobs in the core's order."""
    underserved = underserved_teams(queues, usage)
    if not underserved:
        return None
    chosen: Job | None = None
    for name, jobs in by_queue.items():
        queue = queues.get(name)
        if queue is None or queue.team not in underserved:
            continue
        for job in jobs[:GANGS_LOOKED_AT]:
            if is_owed_gang(job, ledger, fleet, now):
                if chosen is None or (job.submitted_at, job.id) < (chosen.submitted_at, chosen.id):
                    chosen = job
                break
    if chosen is None:
        return None
    return Drain(chosen, _nodes_to_drain(chosen, fleet))


def _nodes_to_drain(job: Job, fleet: FleetState) -> tuple[int, ...]:
    """As many nodes as the gang has pods, the ones with the most free GPUs (the soonest whole, by what is known),
    inside the roomiest domain of the level the gang requires, if any."""
    classes = fleet.tolerated_classes(job)
    required = job.topology.required
    if required and required in fleet.domains:
        groups = [domain.node_indices for domain in fleet.domains[required]]
    else:
        groups = [range(len(fleet.nodes))]
    best: list[int] = []
    best_free = -1
    for group in groups:
        eligible = sorted((i for i in group if fleet.is_eligible(i, classes)), key=lambda i: (-fleet.free[i], i))
        picked = eligible[: job.pods]
        free = sum(max(fleet.free[i], 0) for i in picked)
        if len(picked) == job.pods and free > best_free:
            best, best_free = picked, free
    return tuple(sorted(best))


def kept_off_drain(drain: Drain, fleet: FleetState) -> str:
    """Why a job that would borrow waits although it fits: the cycle's verdict (PendingReason.ORDER)."""
    nodes = ", ".join(fleet.nodes[i].name for i in drain.nodes)
    gang = drain.job
    return (f"would borrow, and the nodes it fits on ({nodes}) are draining for gang {gang.id} of team {gang.team}, "
            f"which its team's quota holds: the team has used less than half the average share")
