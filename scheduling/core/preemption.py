"""Preemption plans: the cheapest set of victims that lets a blocked gang fit, inside one domain.

Candidates follow the pending job's queue policy:
- within its own queue: admitted jobs of lower priority;
- reclaim: when the job asks only for its queue's own nominal quota, jobs of other queues of the
  cohort while those queues use borrowed capacity;
never a non-preemptible job, never the job that preempted this one (no ping-pong), never a job
admitted in the same cycle.

Cost is displacement: GPU-hours of work lost since each victim's last checkpoint plus a restart
overhead. For each domain the gang may use, victims are added cheapest first until quota and
placement both succeed *in that domain*, then any victim whose removal proves unnecessary is
dropped (most expensive first). The cheapest domain's plan wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from scheduling.core.model import Job, PendingReason, PreemptionPlan, Queue, SchedulerConfig, Victim
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger, cohort_of
from scheduling.core.topology import levels_to_try


def displacement_cost_gpu_hours(job: Job, now: float, restart_overhead_s: float) -> float:
    """Work lost if `job` stops now: time since its last checkpoint, plus restarting, times its GPUs."""
    elapsed = max(0.0, now - job.started_at) if job.started_at is not None else 0.0
    lost_s = elapsed % job.checkpoint_interval_s if job.checkpoint_interval_s else elapsed
    return job.gpus * (lost_s + restart_overhead_s) / 3600.0


def needs_approval(plan: PreemptionPlan, job: Job, config: SchedulerConfig, approved: frozenset[int] | None) -> bool:
    """Another team pays, or the plan costs more than the threshold, unless an admin approved these victims."""
    if approved is not None and plan.victim_ids <= approved:
        return False
    other_team = any(victim.team != job.team for victim in plan.victims)
    return (other_team and config.cross_team_needs_approval) or plan.cost_gpu_hours > config.approval_threshold_gpu_hours


@dataclass(slots=True)
class _Candidate:
    job: Job
    cost_gpu_hours: float
    node_indices: frozenset[int]


def candidate_victims(
    job: Job,
    queues: Mapping[str, Queue],
    holding: Iterable[Job],
    ledger: QuotaLedger,
    *,
    protected: set[int],
) -> list[Job]:
    queue = queues[job.queue]
    policy = queue.preemption
    quota = queue.quotas.get(job.flavor)
    reclaims = (
        policy.may_reclaim_in_cohort
        and queue.cohort is not None
        and quota is not None
        and ledger.usage(queue.name, job.flavor) + job.gpus <= quota.nominal
    )
    candidates = []
    for other in holding:
        if other.flavor != job.flavor or not other.is_preemptible:
            continue
        if other.id in protected or other.id == job.preempted_by:
            continue
        if other.queue == job.queue:
            if policy.may_preempt_within_queue and other.priority < job.priority:
                candidates.append(other)
        elif reclaims:
            other_queue = queues.get(other.queue)
            if other_queue is not None and cohort_of(other_queue) == cohort_of(queue):
                if ledger.borrowed(other_queue, job.flavor) > 0:
                    candidates.append(other)
    return candidates


def plan_preemption(
    job: Job,
    *,
    candidates: Sequence[Job],
    fleet: FleetState,
    ledger: QuotaLedger,
    now: float,
    config: SchedulerConfig,
    reason: PendingReason,
) -> PreemptionPlan | None:
    """The cheapest victim set that makes `job` fit quota and one domain, or None. State is left as found."""
    if not candidates:
        return None
    scored = sorted(
        (
            _Candidate(
                c,
                displacement_cost_gpu_hours(c, now, config.restart_overhead_s),
                frozenset(fleet.index_of[p.node] for p in c.placement if p.node in fleet.index_of),
            )
            for c in candidates
        ),
        key=lambda c: (c.cost_gpu_hours, c.job.priority, -(c.job.started_at or 0.0), c.job.id),
    )
    quota_blocks = reason is PendingReason.QUOTA
    best: tuple | None = None
    for rank, level in enumerate(levels_to_try(fleet.topology, job.topology)):
        for domain in fleet.domains.get(level, ()):
            members = set(domain.node_indices)
            useful = [c for c in scored if quota_blocks or c.node_indices & members]
            if not useful:
                continue
            victims = _victims_for_domain(job, domain, useful, fleet, ledger)
            if victims is None:
                continue
            cost = sum(v.cost_gpu_hours for v in victims)
            key = (cost, rank, domain.key)
            if best is None or key < best[0]:
                best = (key, domain, victims)
    if best is None:
        return None
    _, domain, victims = best
    return PreemptionPlan(
        job_id=job.id,
        victims=tuple(
            Victim(v.job.id, v.job.queue, v.job.team, v.job.gpus, round(v.cost_gpu_hours, 4))
            for v in sorted(victims, key=lambda v: v.job.id)
        ),
        domain=domain.key,
        reason=reason,
    )


def _victims_for_domain(job, domain, useful, fleet: FleetState, ledger: QuotaLedger):
    removed: list[_Candidate] = []
    fits = lambda: ledger.check(job).fits and fleet.place(job, within=domain) is not None  # noqa: E731
    try:
        for candidate in useful:
            _evict(candidate.job, fleet, ledger)
            removed.append(candidate)
            if fits():
                break
        else:
            return None
        for candidate in sorted(removed, key=lambda c: -c.cost_gpu_hours):
            _restore(candidate.job, fleet, ledger)
            if fits():
                removed.remove(candidate)
            else:
                _evict(candidate.job, fleet, ledger)
        return list(removed)
    finally:
        for candidate in removed:
            _restore(candidate.job, fleet, ledger)


def _evict(job: Job, fleet: FleetState, ledger: QuotaLedger) -> None:
    fleet.release_placement(job.placement, job)
    ledger.remove(job)


def _restore(job: Job, fleet: FleetState, ledger: QuotaLedger) -> None:
    fleet.allocate_placement(job.placement, job)
    ledger.add(job)


__all__ = ["candidate_victims", "displacement_cost_gpu_hours", "needs_approval", "plan_preemption"]
