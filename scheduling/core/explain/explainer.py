"""The explainer: why each pending job waits (the diagnosis), what would start it (the fixes) and the sentences a
person reads (the messages), once per distinct shape per pass; and the pass's entry point, explain_pending.

Explanations are computed once per distinct shape per pass (flavor, pod sets, topology, tolerations, queue, priority,
and the cycle's verdict); jobs of one shape share one object."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from scheduling.core.attained import ServiceOrder
from scheduling.core.explain.diagnosis import Diagnosis
from scheduling.core.explain.facts import Explanation, Level
from scheduling.core.explain.fixes import MAX_PREEMPTION_PLANS, Fixes
from scheduling.core.explain import messages
from scheduling.core.fairshare import borrows_without_checkpoints, sort_queue
from scheduling.core.model import CycleResult, Job, JobState, Pending, PendingReason, PlannedPreemption, PreemptionPlan, Snapshot
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger, cohort_of

def holding_after(snapshot: Snapshot, result: CycleResult) -> dict[int, Job]:
    """Jobs holding GPUs once the cycle's decisions apply: minus evicted and preempted, plus admitted."""
    gone = {e.job_id for e in result.evictions}
    gone.update(v for a in result.admissions for v in a.preempted)
    holding = {job.id: job for job in snapshot.admitted if job.id not in gone}
    if result.admissions:
        pending = {job.id: job for job in snapshot.pending}
        for admission in result.admissions:
            job = pending.get(admission.job_id)
            if job is not None:
                holding[job.id] = replace(
                    job, state=JobState.ADMITTED, placement=admission.placement, admitted_at=snapshot.now, started_at=None
                )
    return holding


class Explainer:
    """Explanations for the pending jobs of one snapshot, against one fleet state and ledger, cached per shape."""

    def __init__(
        self,
        snapshot: Snapshot,
        fleet: FleetState,
        ledger: QuotaLedger,
        holding: Iterable[Job],
        *,
        protected: Iterable[int] = (),
        plans: Iterable[PlannedPreemption] = (),
        max_preemption_plans: int = MAX_PREEMPTION_PLANS,
        declined: Mapping[int, str] = {},
    ) -> None:
        self.snapshot = snapshot
        self.diagnosis = Diagnosis(snapshot, fleet, ledger, holding)
        self.fixes = Fixes(self.diagnosis, protected=protected, plans=plans, max_preemption_plans=max_preemption_plans,
                           declined=declined)
        self._cache: dict[tuple, Explanation] = {}

    @classmethod
    def after_cycle(cls, snapshot: Snapshot, result: CycleResult, **options) -> Explainer:
        """On the fleet and ledger the cycle finished with (CycleResult.state_after), which the explainer leaves as found."""
        state = result.state_after
        return cls(
            snapshot, state.fleet, state.ledger, holding_after(snapshot, result).values(),
            protected={a.job_id for a in result.admissions}, plans=result.preemptions, declined=result.declined, **options,
        )

    def explain(self, job: Job, verdict: Pending | None = None) -> Explanation:
        key = self.key(job, verdict)
        explanation = self._cache.get(key)
        if explanation is None:
            explanation = self._cache[key] = self._explain(job, verdict)
        return explanation

    @staticmethod
    def key(job: Job, verdict: Pending | None) -> tuple:
        """Jobs of one key share an explanation: the shape, the queue, the priority, and a verdict that names the job."""
        base = (job.queue, job.flavor, job.pod_sets, job.topology, job.tolerations, job.priority)
        kind = verdict.reason if verdict is not None else None
        if kind is PendingReason.AWAITING_APPROVAL:
            return (*base, kind, job.id)
        if kind is PendingReason.ORDER or kind is PendingReason.BACKOFF or kind is PendingReason.PRIORITY_CLASS:
            return (*base, kind, verdict.message)
        return base

    def _explain(self, job: Job, verdict: Pending | None) -> Explanation:
        queue = self.snapshot.queues.get(job.queue)
        quota = self.diagnosis.quota(job, queue)
        if queue is None:
            return Explanation(Level.QUOTA, quota.message, quota, None, None, None, (), never_fits=True)
        fit = self.diagnosis.fit(job)
        nodes = self.diagnosis.nodes(job)
        health = self.diagnosis.health(job.flavor)
        fits_healthy = self.diagnosis.fits(job, "health")
        fits_now = self.diagnosis.fits(job, "actual")
        if not quota.fits:
            blocking = Level.QUOTA
        elif not fit.fits:
            blocking = Level.FIT
        elif not fits_healthy:
            blocking = Level.NODES
        elif not fits_now:
            blocking = Level.HEALTH
        else:
            blocking = None
        order = ""
        if verdict is not None and verdict.reason in (PendingReason.ORDER, PendingReason.BACKOFF):
            order = verdict.message
            if blocking is None:
                blocking = Level.ORDER
        class_cap = verdict.message if verdict is not None and verdict.reason is PendingReason.PRIORITY_CLASS else ""
        if class_cap:  # the cycle checks the class's cap before quota and placement
            blocking = Level.PRIORITY_CLASS
        never = self.diagnosis.never_fits(job, queue)
        fixes = self.fixes.fixes(job, queue, blocking, quota, fit, nodes, health, never, verdict)
        summary = class_cap or messages.summary(job, blocking, quota, fit, nodes, health, order, never)
        headline = messages.headline(job, queue, self.snapshot.queues, blocking, quota, fit, nodes, health, order, never, fixes,
                                     now=self.snapshot.now)
        return Explanation(blocking, summary, quota, fit, nodes, health, fixes, order=order, never_fits=never, headline=headline)

    def plan(self, job: Job, reason: PendingReason) -> PreemptionPlan | None:
        """The core's preemption plan for `job` on this state (what the cycle would plan)."""
        return self.fixes.plan(job, reason)


_job_id = operator.attrgetter("id")


def explain(
    job: Job,
    fleet: FleetState,
    ledger: QuotaLedger,
    snapshot: Snapshot,
    *,
    holding: Iterable[Job] | None = None,
    verdict: Pending | None = None,
    plans: Iterable[PlannedPreemption] = (),
    protected: Iterable[int] = (),
) -> Explanation:
    """Why `job` is pending on this fleet state and ledger (holding defaults to the snapshot's admitted jobs)."""
    explainer = Explainer(snapshot, fleet, ledger, snapshot.admitted if holding is None else holding,
                          plans=plans, protected=protected)
    return explainer.explain(job, verdict)


@dataclass
class PassExplanations:
    """One pass: an explanation per pending job (shared between jobs of one shape) and each job's place in its queue."""

    by_job: dict[int, Explanation] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)
    """Job id → how many pending jobs of its queue go before it (the core's order)."""
    shapes: int = 0


def _note_attained_service(queued: list[Job], by_job: dict, service: ServiceOrder) -> None:
    """Jobs that ran before wait behind the fresher jobs of their queue (SchedulerConfig.service_levels_gpu_h), until
    they have waited long enough to go back to the first level (promote_after_waiting): say which, with the count.
    Only such jobs are touched (few: the preempted and evicted), so shapes stay shared."""
    ahead_by_level: dict[int, int] = {}
    for job in queued:
        level = service.pending_level(job)
        note = None
        if job.attained_gpu_s and level:
            fresher = sum(count for lower, count in ahead_by_level.items() if lower < level)
            note = messages.attained_service(job, level, fresher)
        elif service.is_promoted(job):
            note = messages.promoted(job, service.promote_after_waiting)
        if note:
            by_job[job.id] = replace(by_job[job.id], attained_service=note, summary=f"{by_job[job.id].summary}; {note}")
        ahead_by_level[level] = ahead_by_level.get(level, 0) + 1


def _note_lent_last(queued: list[Job], by_job: dict, verdicts: dict, ledger: QuotaLedger,
                    lent_to: dict[str, set[str]]) -> None:
    """Jobs kept out by quota or fit that would borrow without checkpoints go after every other queue's next job
    (SchedulerConfig.uncheckpointed_borrowers_last): say so where the cycle lent GPUs to a checkpointing job of another
    queue of the job's cohort (`lent_to`: cohort → those queues), once per shared explanation."""
    queue = ledger.queues.get(queued[0].queue)
    if queue is None or not lent_to.get(cohort_of(queue), set()) - {queue.name}:
        return
    noted: dict[int, tuple[Explanation, Explanation]] = {}  # id of the shared one → (it, kept alive; it noted)
    for job in queued:
        if not borrows_without_checkpoints(job, ledger) or verdicts[job.id][0] not in _LENDING:
            continue
        shared = by_job[job.id]
        pair = noted.get(id(shared))
        if pair is None:
            pair = noted[id(shared)] = (shared, replace(shared, summary=f"{shared.summary}; {messages.lent_last()}"))
        by_job[job.id] = pair[1]


def _lent_to(snapshot: Snapshot, result: CycleResult) -> dict[str, set[str]]:
    """Per cohort, the queues whose checkpointing jobs the cycle admitted on borrowed quota (the ones lent to first)."""
    borrowing = {admission.job_id for admission in result.admissions if admission.is_borrowing}
    lent: dict[str, set[str]] = {}
    if borrowing:
        for job in snapshot.pending:
            if job.id in borrowing and job.checkpoint_interval_s and job.queue in snapshot.queues:
                lent.setdefault(cohort_of(snapshot.queues[job.queue]), set()).add(job.queue)
    return lent


_LENDING = (PendingReason.QUOTA, PendingReason.FIT)
"""The verdicts lent GPUs would lift."""


def explain_pending(snapshot: Snapshot, result: CycleResult, **options) -> PassExplanations:
    """Explain every job the cycle left pending, once per distinct shape, against the state after the cycle.

    Queue heads go first, so the budget of preemption plans goes to the jobs that may preempt next.
    """
    explainer = Explainer.after_cycle(snapshot, result, **options)
    verdicts = result.pending.by_job()
    out = PassExplanations()
    by_queue: dict[str, list[Job]] = {}
    for job in snapshot.pending:
        if job.id in verdicts:
            by_queue.setdefault(job.queue, []).append(job)
    position = out.position
    service = ServiceOrder.at(snapshot.config, snapshot.now)
    for queued in by_queue.values():
        sort_queue(queued, service)
        position.update(zip(map(_job_id, queued), range(len(queued))))
    explain_one, by_job, cache = explainer.explain, out.by_job, explainer._cache
    for queued in by_queue.values():
        head = queued[0]
        by_job[head.id] = explain_one(head, Pending(head.id, *verdicts[head.id]))
    plain = (PendingReason.QUOTA, PendingReason.FIT, PendingReason.NODES, PendingReason.HEALTH)
    for queued in by_queue.values():
        for job in queued:
            # The hot path over 100,000 jobs: one tuple and one dictionary lookup per job.
            verdict = verdicts[job.id]
            if verdict[0] in plain:
                explanation = cache.get((job.queue, job.flavor, job.pod_sets, job.topology, job.tolerations, job.priority))
                if explanation is not None:
                    by_job[job.id] = explanation
                    continue
            by_job[job.id] = explain_one(job, Pending(job.id, *verdict))
    if service.levels_gpu_h:
        for queued in by_queue.values():
            _note_attained_service(queued, by_job, service)
    lent_to = _lent_to(snapshot, result) if snapshot.config.uncheckpointed_borrowers_last else {}
    if lent_to:
        for queued in by_queue.values():
            _note_lent_last(queued, by_job, verdicts, explainer.diagnosis.ledger, lent_to)
    out.shapes = len(explainer._cache)
    return out

