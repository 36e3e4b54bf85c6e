"""Preemption plans: the victims Kueue would choose for a blocked gang, in one plan, inside one domain.

Candidates follow the pending job's queue policy (Kueue's `withinClusterQueue: LowerPriority` and
`reclaimWithinCohort: Any`):
- within its own queue: admitted jobs of strictly lower priority;
- reclaim: when the job, once admitted (after its own queue's candidates left, if need be), stays
  within its queue's nominal quota, jobs of any priority of the other queues of the cohort that borrow;
- idle: a job of the cohort flagged idle (core.idle), of any priority, whether or not its queue borrows;
never a non-preemptible job, never the job that preempted this one (no ping-pong), never a job
admitted in the same cycle.

Candidates are taken in Kueue's order, with our displacement cost (GPU-hours of work lost since each
victim's last checkpoint, plus a restart overhead) as the tie-breaker:
0. idle jobs before anything else (they lose no work), the longest idle first;
1. then reclaim: borrowers of the most-over-nominal queue first, then lowest priority, cheapest,
   most recently started; a borrower whose queue no longer borrows once earlier victims are gone is
   skipped;
2. then the preemptor's own queue: lowest priority, cheapest, most recently started.
For each domain the gang may use, victims are taken in that order until quota and placement both
succeed *in that domain*, so one plan may mix reclaim and within-queue victims; a plan that reclaims
must leave the job within its nominal quota, and a job that would borrow as things stand first tries
its own queue's victims alone (Kueue's two runs, with and without borrowing). Then Kueue's
minimal-set pass: victims are put back in the reverse order they were taken (highest priority first
within each rule), and each one stays running if the gang still fits. Among domains the plan that
reaches least far down the order wins (its most preemptible-last victim: reclaim before own queue,
then the lowest priority), then the cheapest.
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from scheduling.core.attained import served_longer_victims
from scheduling.core.model import FLEET, Job, PendingReason, PreemptionPlan, Queue, SchedulerConfig, Victim
from scheduling.core.idle import is_flagged_idle, working_until
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger, cohort_of
from scheduling.core.topology import levels_to_try

IDLE, RECLAIM, WITHIN_QUEUE = -1, 0, 1
"""Which rule makes a job a candidate, in the order candidates are taken."""


def rule_of(candidate: Job, job: Job, now: float, grace_s: float) -> int:
    """The rule that makes `candidate` a victim for `job`: IDLE once it is flagged idle, else WITHIN_QUEUE in `job`'s
    own queue, else RECLAIM (another queue's candidate borrows: candidate_victims)."""
    if is_flagged_idle(candidate, now, grace_s):
        return IDLE
    return WITHIN_QUEUE if candidate.queue == job.queue else RECLAIM


def work_since_checkpoint_s(job: Job, now: float) -> float:
    """Seconds of work a stop now would lose: since its last checkpoint (checkpoints fall every interval from the
    start of the run), or its whole run without checkpoints. Time it spent idle (core.idle) is no work."""
    elapsed = max(0.0, working_until(job, now) - job.started_at) if job.started_at is not None else 0.0
    return elapsed % job.checkpoint_interval_s if job.checkpoint_interval_s else elapsed


def displacement_cost_gpu_hours(job: Job, now: float, restart_overhead_s: float) -> float:
    """Work lost if `job` stops now, plus restarting, times its GPUs: a job idle since its start loses only the
    restart."""
    return job.gpus * (work_since_checkpoint_s(job, now) + restart_overhead_s) / 3600.0


def needs_approval(plan: PreemptionPlan, job: Job, config: SchedulerConfig, approved: frozenset[int] | None) -> bool:
    """Another team pays, or the plan costs more than the threshold, unless an admin approved these victims."""
    if approved is not None and plan.victim_ids <= approved:
        return False
    other_team = any(victim.team != job.team for victim in plan.victims)
    return (other_team and config.cross_team_needs_approval) or plan.cost_gpu_hours > config.approval_threshold_gpu_hours


@dataclass(slots=True, eq=False)
class _Candidate:
    job: Job
    rule: int
    order: tuple
    """Position in Kueue's candidate order (then ours): smaller is taken first."""
    cost_gpu_hours: float
    gpus_by_domain: dict[str, int]
    """GPUs this victim would free in each domain it has pods in."""
    gpus_by_node: tuple[tuple[int, int], ...]
    """(node index, GPUs) of each of its pods: what taking it frees, without looking its placement up again."""
    lender_queue: Queue | None
    """For a reclaim candidate, its queue: skipped once that queue no longer borrows."""
    gpus: int

    @property
    def band(self) -> tuple[int, int]:
        """How far down the order a plan reaches when it takes this victim: rule, then priority."""
        return self.rule, self.job.priority


MAX_DOMAINS_EXAMINED = 8
"""Domains whose first-victims-in-order estimate is best get an exact check; the rest are skipped."""


def candidate_victims(
    job: Job,
    queues: Mapping[str, Queue],
    holding: Iterable[Job],
    ledger: QuotaLedger,
    *,
    protected: set[int],
    idle_before: float | None = None,
) -> list[Job]:
    """`idle_before`: jobs idle since before then are flagged idle (now − the grace period); None: none is."""
    queue = queues[job.queue]
    policy = queue.preemption
    lenders: set[str] = set()
    if policy.may_reclaim_in_cohort and queue.cohort is not None:
        lenders = {
            name for name, other in queues.items()
            if name != job.queue and other.cohort == queue.cohort and ledger.borrowed(other, job.flavor) > 0
        }
    own: list[Job] = []
    borrowed_from: list[Job] = []
    idle: list[Job] = []
    cohort = cohort_of(queue)
    for other in holding:
        if other.flavor != job.flavor or not other.is_preemptible:
            continue
        if other.id in protected or other.id == job.preempted_by:
            continue
        if (idle_before is not None and other.idle_since is not None and other.idle_since <= idle_before
                and other.queue in queues and cohort_of(queues[other.queue]) == cohort):
            idle.append(other)
        elif other.queue == job.queue:
            if policy.may_preempt_within_queue and other.priority < job.priority:
                own.append(other)
        elif other.queue in lenders:
            borrowed_from.append(other)
    if borrowed_from and _is_within_nominal(job, ledger, freed_gpus=sum(c.gpus for c in own)):
        return idle + own + borrowed_from
    return idle + own


def preemption_candidates(job: Job, queues: Mapping[str, Queue], holding: Collection[Job], ledger: QuotaLedger, *,
                          protected: set[int], now: float, config: SchedulerConfig) -> list[Job]:
    """Every job the cycle may take for `job` now: candidate_victims with the jobs flagged idle, then the jobs of its
    queue served a whole level longer (core.attained). The cycle, the plans kept for an admin and the explanation's
    preempt fix all plan from this one list, so they name the same victims."""
    candidates = candidate_victims(job, queues, holding, ledger, protected=protected, idle_before=now - config.idle_grace_s)
    return candidates + served_longer_victims(job, holding, now, config, protected=protected, already=candidates)


def _is_within_nominal(job: Job, ledger: QuotaLedger, freed_gpus: int = 0) -> bool:
    """Would the job, admitted after `freed_gpus` of its queue's own usage left, stay within its nominal
    quota? Reclaim is only for such a job (Kueue's reclaim without borrowing)."""
    quota = ledger.queues[job.queue].quotas.get(job.flavor)
    return quota is not None and ledger.usage(job.queue, job.flavor) - freed_gpus + job.gpus <= quota.nominal


def state_fingerprint(job: Job, reason: PendingReason, candidates: Sequence[Job], ledger: QuotaLedger,
                      fleet: FleetState, domain_key: str) -> str:
    """What a plan for `job` was made from: its candidates, its cohort's usage, the free GPUs of the plan's domain.

    While it is unchanged, planning again would give the same plan: a head whose plan awaits an admin
    keeps it without spending the cycle's planning budget. Stable across processes (it is stored).
    """
    queue = ledger.queues[job.queue]
    cohort = cohort_of(queue)
    usage = tuple(
        (name, ledger.usage(name, job.flavor)) for name, other in sorted(ledger.queues.items()) if cohort_of(other) == cohort
    )
    domain = fleet.domain_by_key.get(domain_key)
    free_gpus = fleet.free_gpus_in(domain, fleet.tolerated_classes(job)) if domain is not None else -1
    state = (job.id, job.priority, job.pod_sets, job.topology, reason.value, domain_key, free_gpus, usage)
    digest = hashlib.blake2b(repr(state).encode(), digest_size=8)
    # Thousands of candidates: packed, in holding order (by id, as the snapshot lists them).
    digest.update(array("q", [c.id for c in candidates]).tobytes())
    digest.update(array("d", [-1.0 if c.started_at is None else c.started_at for c in candidates]).tobytes())
    return digest.hexdigest()


def plan_preemption(
    job: Job,
    *,
    candidates: Sequence[Job],
    fleet: FleetState,
    ledger: QuotaLedger,
    now: float,
    config: SchedulerConfig,
    reason: PendingReason,
    footprints: dict[int, tuple] | None = None,
) -> PreemptionPlan | None:
    """The victims, in Kueue's order, that make `job` fit quota and one domain, or None. State is left as found.

    `footprints` (job id → GPUs per domain key and per node) may be shared by the plans of one cycle: a
    running job's placement does not change while the cycle plans.
    """
    if not candidates:
        return None
    if footprints is None:
        footprints = {}
    ordered = _in_order(job, candidates, fleet, ledger, now, config, footprints)
    for attempt in _attempts(job, ordered, ledger):
        plan = _plan_in_best_domain(job, attempt, fleet, ledger, reason)
        if plan is not None:
            return plan
    return None


def _attempts(job: Job, ordered: list[_Candidate], ledger: QuotaLedger) -> list[list[_Candidate]]:
    """Kueue's runs over the candidates. A job within its nominal quota as things stand reclaims first.
    One that would borrow first tries its own queue's victims alone (it may borrow then), and only then
    reclaim as well (a plan that reclaims must leave it within nominal)."""
    within_queue = [c for c in ordered if c.rule != RECLAIM]
    if len(within_queue) == len(ordered) or not any(c.rule == WITHIN_QUEUE for c in ordered) or _is_within_nominal(job, ledger):
        return [ordered]
    return [within_queue, ordered]


def _plan_in_best_domain(job: Job, ordered: list[_Candidate], fleet: FleetState, ledger: QuotaLedger,
                         reason: PendingReason) -> PreemptionPlan | None:
    quota_blocks = reason is PendingReason.QUOTA
    if quota_blocks and not _quota_can_be_met(job, ordered, ledger):
        return None
    if quota_blocks and fleet.fits(job):
        # Only quota blocks: the victims may run anywhere; the gang then goes where it fits now.
        victims = _victims_for_domain(job, None, ordered, fleet, ledger)
        return _plan(job, victims, FLEET, reason) if victims is not None else None
    classes = fleet.tolerated_classes(job)
    # Estimate each domain by the first victims in order that free enough GPUs in it; check the best few exactly.
    in_domain: dict[str, list[_Candidate]] = {}
    for candidate in ordered:
        for key in candidate.gpus_by_domain:
            in_domain.setdefault(key, []).append(candidate)
    estimates = []
    for rank, level in enumerate(levels_to_try(fleet.topology, job.topology)):
        for domain in fleet.domains.get(level, ()):
            missing = job.gpus - fleet.free_gpus_in(domain, classes)
            band, cost = (RECLAIM, float("-inf")), 0.0
            for candidate in in_domain.get(domain.key, ()):
                if missing <= 0:
                    break
                missing -= candidate.gpus_by_domain[domain.key]
                band, cost = max(band, candidate.band), cost + candidate.cost_gpu_hours
            if missing <= 0:
                estimates.append(((band, cost, rank, domain.key), rank, domain))
    estimates.sort(key=lambda e: e[0])
    best: tuple | None = None
    for _, rank, domain in estimates[:MAX_DOMAINS_EXAMINED]:
        # Victims elsewhere still return quota when quota blocks; only the domain's own help placement.
        useful = ordered if quota_blocks else in_domain.get(domain.key, [])
        victims = _victims_for_domain(job, domain, useful, fleet, ledger, to_beat=best[0][:2] if best else None)
        if victims is None:
            continue
        key = (max(v.band for v in victims), sum(v.cost_gpu_hours for v in victims), len(victims), rank, domain.key)
        if best is None or key < best[0]:
            best = (key, domain, victims)
    if best is None:
        return None
    _, domain, victims = best
    return _plan(job, victims, domain.key, reason)


def _in_order(job, candidates, fleet, ledger, now, config, footprints) -> list[_Candidate]:
    """Kueue's candidate order, then ours: reclaim (most-over-nominal queue, lowest priority) before the
    preemptor's own queue (lowest priority); then the cheapest displacement, the most recently started."""
    queues = ledger.queues
    ordered = []
    for c in candidates:
        cost = displacement_cost_gpu_hours(c, now, config.restart_overhead_s)
        recency = -(c.started_at if c.started_at is not None else now)
        rule = rule_of(c, job, now, config.idle_grace_s)
        if rule == IDLE:
            lender, over_nominal = None, 0
            recency = c.idle_since  # the longest idle first
        elif rule == WITHIN_QUEUE:
            lender, over_nominal = None, 0
        else:
            lender = queues[c.queue]
            over_nominal = ledger.borrowed(lender, job.flavor)
        order = (rule, -over_nominal, c.priority, cost, recency, c.id)
        ordered.append(_Candidate(c, rule, order, cost, *_footprint(c, fleet, footprints), lender, c.gpus))
    ordered.sort(key=lambda c: c.order)
    return ordered


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


def _quota_can_be_met(job: Job, ordered: Sequence[_Candidate], ledger: QuotaLedger) -> bool:
    """Would removing every candidate let the job pass quota? If not, no domain can help.

    Usage adds up, so one shift per queue gives what removing each of thousands of candidates would.
    """
    by_queue: dict[str, tuple[Job, int]] = {}
    for candidate in ordered:
        first, gpus = by_queue.get(candidate.job.queue, (candidate.job, 0))
        by_queue[candidate.job.queue] = (first, gpus + candidate.job.gpus)
    for first, gpus in by_queue.values():
        ledger.shift(first, -gpus)
    try:
        return ledger.fits(job)
    finally:
        for first, gpus in by_queue.values():
            ledger.shift(first, gpus)


def _footprint(job: Job, fleet: FleetState, known: dict[int, tuple]) -> tuple[dict[str, int], tuple[tuple[int, int], ...]]:
    """The GPUs the job holds per domain and per node (cached in `known` for the cycle)."""
    cached = known.get(job.id)
    if cached is not None:
        return cached
    per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
    by_domain: dict[str, int] = {}
    by_node: list[tuple[int, int]] = []
    for pod in job.placement:
        i = fleet.index_of.get(pod.node)
        if i is not None:
            gpus = per_pod.get(pod.pod_set, 0)
            by_node.append((i, gpus))
            for key in fleet.domain_keys_of(i):
                by_domain[key] = by_domain.get(key, 0) + gpus
    known[job.id] = footprint = (by_domain, tuple(by_node))
    return footprint


def _victims_for_domain(job, domain, ordered, fleet: FleetState, ledger: QuotaLedger,
                        to_beat: tuple | None = None) -> list[_Candidate] | None:
    """Take candidates in order until quota and placement in `domain` succeed; then Kueue's minimal-set pass.
    None if no victims make room, or if they could not make a plan better than `to_beat` (band, cost).

    With no domain only quota is checked: the caller knows the gang fits the fleet as it is.
    """
    removed: list[_Candidate] = []
    reclaimed = 0
    classes = fleet.tolerated_classes(job)

    def take(candidate: _Candidate) -> None:
        nonlocal reclaimed
        _evict(candidate, fleet, ledger)
        reclaimed += candidate.rule == RECLAIM

    def put_back(candidate: _Candidate) -> None:
        nonlocal reclaimed
        _restore(candidate, fleet, ledger)
        reclaimed -= candidate.rule == RECLAIM

    def has_room() -> bool:
        """The gang fits its domain, and a plan that reclaims leaves it within nominal (its quota aside)."""
        if reclaimed and not _is_within_nominal(job, ledger):
            return False
        return domain is None or (fleet.free_gpus_in(domain, classes) >= job.gpus and fleet.fits(job, within=domain))

    def fits() -> bool:
        return ledger.fits(job) and has_room()

    try:
        quota_fits = ledger.fits(job)
        for candidate in ordered:
            if candidate.lender_queue is not None and ledger.borrowed(candidate.lender_queue, job.flavor) <= 0:
                continue  # its queue is back within nominal: nothing left to reclaim from it
            if quota_fits and domain is not None and domain.key not in candidate.gpus_by_domain:
                continue  # quota is met; a victim outside the domain frees no room the gang can use
            take(candidate)
            removed.append(candidate)
            # Taking victims only lowers usage, so quota once met stays met while they are taken.
            quota_fits = quota_fits or ledger.fits(job)
            if quota_fits and has_room():
                break
        else:
            return None
        # The last victim taken was needed; the others go back, latest taken first, if the gang still fits. It stays,
        # so the plan reaches at least its band and costs at least its cost: if that is already worse, stop here.
        last = removed[-1]
        if to_beat is not None and (last.band, last.cost_gpu_hours) > to_beat:
            return None
        for candidate in reversed(removed[:-1]):
            put_back(candidate)
            if fits():
                removed = [c for c in removed if c is not candidate]
            else:
                take(candidate)
        return list(removed)
    finally:
        for candidate in removed:
            _restore(candidate, fleet, ledger)


def _evict(candidate: _Candidate, fleet: FleetState, ledger: QuotaLedger) -> None:
    fleet.release_nodes(candidate.gpus_by_node)
    ledger.shift(candidate.job, -candidate.gpus)


def _restore(candidate: _Candidate, fleet: FleetState, ledger: QuotaLedger) -> None:
    fleet.allocate_nodes(candidate.gpus_by_node)
    ledger.shift(candidate.job, candidate.gpus)


__all__ = ["candidate_victims", "displacement_cost_gpu_hours", "needs_approval", "plan_preemption", "preemption_candidates",
           "rule_of", "state_fingerprint"]
