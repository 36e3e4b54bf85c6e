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

from scheduling.core.model import FLEET, Job, PendingReason, PreemptionPlan, Queue, SchedulerConfig, Victim
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


@dataclass(slots=True, eq=False)
class _Candidate:
    job: Job
    cost_gpu_hours: float
    gpus_by_domain: dict[str, int]
    """GPUs this victim would free in each domain it has pods in."""


MAX_DOMAINS_EXAMINED = 8
"""Domains whose cheapest-victims estimate is lowest get an exact check; the rest are skipped."""


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
    domain_gpus: dict[int, dict[str, int]] | None = None,
) -> PreemptionPlan | None:
    """The cheapest victim set that makes `job` fit quota and one domain, or None. State is left as found.

    `domain_gpus` (job id → GPUs per domain key) may be shared by the plans of one cycle: a running
    job's placement does not change while the cycle plans.
    """
    if not candidates:
        return None
    if domain_gpus is None:
        domain_gpus = {}
    scored = sorted(
        (_Candidate(c, displacement_cost_gpu_hours(c, now, config.restart_overhead_s), _gpus_by_domain(c, fleet, domain_gpus))
         for c in candidates),
        key=lambda c: (c.cost_gpu_hours, c.job.priority, -(c.job.started_at or 0.0), c.job.id),
    )
    quota_blocks = reason is PendingReason.QUOTA
    if quota_blocks and not _quota_can_be_met(job, scored, ledger):
        return None
    if quota_blocks and fleet.place(job) is not None:
        # Only quota blocks: the victims may run anywhere; the gang then goes where it fits now.
        victims = _victims_for_domain(job, None, scored, fleet, ledger)
        return _plan(job, victims, FLEET, reason) if victims is not None else None
    classes = fleet.tolerated_classes(job)
    # Estimate each domain by the cheapest victims that free enough GPUs in it; check the best few exactly.
    in_domain: dict[str, list[_Candidate]] = {}
    for candidate in scored:
        for key in candidate.gpus_by_domain:
            in_domain.setdefault(key, []).append(candidate)
    estimates = []
    for rank, level in enumerate(levels_to_try(fleet.topology, job.topology)):
        for domain in fleet.domains.get(level, ()):
            missing = job.gpus - fleet.free_gpus_in(domain, classes)
            estimate = 0.0
            for candidate in in_domain.get(domain.key, ()):
                if missing <= 0:
                    break
                missing -= candidate.gpus_by_domain[domain.key]
                estimate += candidate.cost_gpu_hours
            if missing <= 0:
                estimates.append((estimate, rank, domain.key, domain))
    estimates.sort(key=lambda e: e[:3])
    best: tuple | None = None
    for estimate, rank, key, domain in estimates[:MAX_DOMAINS_EXAMINED]:
        useful = in_domain[domain.key] if domain.key in in_domain else []
        if quota_blocks:  # victims elsewhere still return quota
            chosen = set(map(id, useful))
            useful = [*useful, *(c for c in scored if id(c) not in chosen)]
        victims = _victims_for_domain(job, domain, useful, fleet, ledger)
        if victims is None:
            continue
        cost = sum(v.cost_gpu_hours for v in victims)
        if best is None or (cost, rank, key) < best[0]:
            best = ((cost, rank, key), domain, victims)
    if best is None:
        return None
    _, domain, victims = best
    return _plan(job, victims, domain.key, reason)


def _plan(job: Job, victims: list[_Candidate], domain_key: str, reason: PendingReason) -> PreemptionPlan:
    return PreemptionPlan(
        job_id=job.id,
        victims=tuple(
            Victim(v.job.id, v.job.queue, v.job.team, v.job.gpus, round(v.cost_gpu_hours, 4))
            for v in sorted(victims, key=lambda v: v.job.id)
        ),
        domain=domain_key,
        reason=reason,
    )


def _quota_can_be_met(job: Job, scored: Sequence[_Candidate], ledger: QuotaLedger) -> bool:
    """Would removing every candidate let the job pass quota? If not, no domain can help."""
    for candidate in scored:
        ledger.remove(candidate.job)
    try:
        return ledger.check(job).fits
    finally:
        for candidate in scored:
            ledger.add(candidate.job)


def _gpus_by_domain(job: Job, fleet: FleetState, known: dict[int, dict[str, int]]) -> dict[str, int]:
    cached = known.get(job.id)
    if cached is not None:
        return cached
    per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
    by_domain: dict[str, int] = {}
    for pod in job.placement:
        i = fleet.index_of.get(pod.node)
        if i is not None:
            for key in fleet.domain_keys_of(i):
                by_domain[key] = by_domain.get(key, 0) + per_pod.get(pod.pod_set, 0)
    known[job.id] = by_domain
    return by_domain


def _victims_for_domain(job, domain, useful, fleet: FleetState, ledger: QuotaLedger) -> list[_Candidate] | None:
    """Cheapest first until quota and placement in `domain` succeed; then drop the unneeded, dearest first.

    With no domain only quota is checked: the caller knows the gang fits the fleet as it is.
    """
    removed: list[_Candidate] = []
    classes = fleet.tolerated_classes(job)

    def fits() -> bool:
        if domain is None:
            return ledger.check(job).fits
        return (
            fleet.free_gpus_in(domain, classes) >= job.gpus
            and ledger.check(job).fits
            and fleet.place(job, within=domain) is not None
        )

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
                removed = [c for c in removed if c is not candidate]
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
