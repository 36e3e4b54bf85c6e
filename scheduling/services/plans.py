"""Which preemption plan rows stand for a pass's decisions: an open plan stays the same plan while it still makes room.

The core plans again whenever the state it planned on changes, and on a busy fleet that is every few seconds:
its new plan may name other victims although the old one still works. An admin cannot approve a plan that is
replaced under their eyes, so after the cycle this step settles the plans against the state the cycle leaves:

1. An approved plan the core did not execute (it planned other victims, or had no budget left) is executed here
   while its victims still hold GPUs and freeing them makes room; victims no longer needed stay running.
2. A proposed plan the core replaced by another plan awaiting approval stands instead, while it still makes room:
   same row, same id. A victim that finished on its own, or is no longer needed, leaves the plan.
3. Anything else is as the core decided. A plan is replaced only when what is left of it no longer makes room.

Nothing here decides on its own *whether* a job gets a plan; the core does. This step chooses which row stands
for it, using the core's own rules (candidates, quota, placement, priority class caps) on the state after the cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scheduling.core.explain import holding_after
from scheduling.core.model import (
    Admission,
    CycleResult,
    Job,
    JobState,
    PendingReason,
    PendingVerdicts,
    PlannedPreemption,
    PreemptionPlan,
    Snapshot,
)
from scheduling.core.preemption import displacement_cost_gpu_hours, needs_approval, preemption_candidates
from scheduling.core.priority_limits import PriorityClassLimits
from scheduling.snapshots import OpenPlan

EXECUTABLE_REASONS = (PendingReason.AWAITING_APPROVAL, PendingReason.QUOTA, PendingReason.FIT)
"""An approved plan runs for a job the cycle left blocked by quota or placement, never for one waiting its turn."""


@dataclass
class SettledPlans:
    decisions: CycleResult
    rows: dict[int, int] = field(default_factory=dict)
    """Job id → the open plan row that stands for the job's plan in `decisions.preemptions`."""
    waiting: set[int] = field(default_factory=set)
    """Approved rows left as they are: their job was not blocked by quota or placement this pass."""


def plans_settle(*, snapshot: Snapshot, decisions: CycleResult, open_plans: dict[int, OpenPlan]) -> SettledPlans:
    """The cycle's decisions with the open plans that still stand (see the module docstring)."""
    settled = SettledPlans(decisions)
    if not open_plans:
        return settled
    verdicts = decisions.pending.by_job()
    admitted = {a.job_id for a in decisions.admissions}
    fresh = {p.plan.job_id: p for p in decisions.preemptions}
    to_execute: list[OpenPlan] = []
    to_keep: list[tuple[OpenPlan, PlannedPreemption]] = []
    for job_id, open_plan in open_plans.items():
        plan, new = open_plan.planned.plan, fresh.get(job_id)
        if job_id in admitted:
            if new is not None and open_plan.is_approved and new.plan.victim_ids <= plan.victim_ids:
                settled.rows[job_id] = open_plan.row_id  # the core executed (part of) the approved plan
            continue
        if job_id not in verdicts:
            continue
        if open_plan.is_approved:
            if verdicts[job_id][0] in EXECUTABLE_REASONS:
                to_execute.append(open_plan)
            else:
                settled.waiting.add(open_plan.row_id)
        elif new is not None and new.needs_approval:
            if new.plan.victim_ids == plan.victim_ids:
                settled.rows[job_id] = open_plan.row_id
            else:
                to_keep.append((open_plan, new))
    if not to_execute and not to_keep:
        return settled

    state = _StateAfterCycle(snapshot, decisions, {p.planned.plan.job_id for p in to_execute} | {p.planned.plan.job_id for p, _ in to_keep})
    executed: dict[int, Admission] = {}
    replaced: dict[int, PlannedPreemption] = {}
    for open_plan in sorted(to_execute, key=lambda p: p.row_id):  # the oldest approval first
        job = state.pending[open_plan.planned.plan.job_id]
        plan = state.still_making_room(job, open_plan.planned.plan)
        if plan is not None:
            executed[job.id] = state.execute(job, plan)
            replaced[job.id] = PlannedPreemption(plan, False)
            settled.rows[job.id] = open_plan.row_id
    for open_plan, new in to_keep:
        job = state.pending[open_plan.planned.plan.job_id]
        plan = state.still_making_room(job, open_plan.planned.plan)
        approved = snapshot.approved_preemptions.get(job.id)
        if plan is not None and needs_approval(plan, job, snapshot.config, approved):
            # The core's fingerprint of this state goes with it: while the state holds, the core proposes it again.
            replaced[job.id] = PlannedPreemption(plan, True, new.fingerprint)
            settled.rows[job.id] = open_plan.row_id
    if not replaced:
        return settled
    preemptions = [replaced.pop(p.plan.job_id, p) for p in decisions.preemptions]
    preemptions.extend(replaced.values())  # approved plans the core did not plan again this pass
    settled.decisions = replace(
        decisions,
        admissions=(*decisions.admissions, *executed.values()),
        preemptions=tuple(preemptions),
        pending=_without(decisions.pending, executed),
    )
    return settled


def _without(pending: PendingVerdicts, job_ids) -> PendingVerdicts:
    if not job_ids:
        return pending
    left = PendingVerdicts()
    for job_id, verdict in pending.by_job().items():
        if job_id not in job_ids:
            left.add(job_id, verdict)
    return left


class _StateAfterCycle:
    """The fleet, quotas and class caps once the cycle's decisions apply (the fleet and ledger are the cycle's own,
    CycleResult.state_after); plans are tried on it and undone, and the ones executed here stay applied."""

    def __init__(self, snapshot: Snapshot, decisions: CycleResult, job_ids: set[int]) -> None:
        self.snapshot = snapshot
        self.holding = holding_after(snapshot, decisions)
        self.fleet, self.ledger = decisions.state_after.fleet, decisions.state_after.ledger
        self.limits = PriorityClassLimits(snapshot.priority_class_caps, self.holding.values())
        self.protected = {a.job_id for a in decisions.admissions}
        self.pending = {job.id: job for job in snapshot.pending if job.id in job_ids}

    def still_making_room(self, job: Job, plan: PreemptionPlan) -> PreemptionPlan | None:
        """The plan less the victims that left or are no longer needed, if freeing the rest lets `job` start in the
        plan's domain; else None. The state is left as found."""
        if job.queue not in self.snapshot.queues:
            return None
        candidates = preemption_candidates(job, self.snapshot.queues, self.holding.values(), self.ledger,
                                           protected=self.protected, now=self.snapshot.now, config=self.snapshot.config)
        candidate_ids = {c.id for c in candidates}
        victims = [v for v in plan.victims if v.job_id in candidate_ids]
        if not victims:
            return None
        released = {v.job_id for v in victims}
        for job_id in released:
            self._release(self.holding[job_id])
        try:
            if not self._fits(job, plan.domain):
                return None
            for victim in sorted(victims, key=lambda v: (-self._cost_now(v.job_id), -v.job_id)):  # spare the costliest first
                self._hold(self.holding[victim.job_id])
                if self._fits(job, plan.domain):
                    released.discard(victim.job_id)
                else:
                    self._release(self.holding[victim.job_id])
            if not released:
                return None  # it starts without stopping anyone: the core admits it
            return replace(plan, victims=tuple(v for v in plan.victims if v.job_id in released))
        finally:
            for job_id in released:
                self._hold(self.holding[job_id])

    def execute(self, job: Job, plan: PreemptionPlan) -> Admission:
        """Stop the plan's victims and admit `job` in its domain (the plan was just checked on this state)."""
        for victim in plan.victims:
            self._release(self.holding.pop(victim.job_id))
        placement = self.fleet.place(job, within=self.fleet.domain_by_key[plan.domain])
        check = self.ledger.check(job)
        pods = self.fleet.commit(placement)
        admitted = replace(job, state=JobState.ADMITTED, placement=pods, admitted_at=self.snapshot.now, started_at=None)
        self.holding[job.id] = admitted
        self.ledger.add(admitted)
        self.limits.add(admitted)
        self.protected.add(job.id)
        return Admission(job.id, pods, check.is_borrowing, preempted=tuple(v.job_id for v in plan.victims))

    def _cost_now(self, job_id: int) -> float:
        return displacement_cost_gpu_hours(self.holding[job_id], self.snapshot.now, self.snapshot.config.restart_overhead_s)

    def _fits(self, job: Job, domain_key: str) -> bool:
        domain = self.fleet.domain_by_key.get(domain_key)
        return (domain is not None and self.limits.check(job) is None and self.ledger.fits(job)
                and self.fleet.fits(job, within=domain))

    def _release(self, job: Job) -> None:
        self.fleet.release_placement(job.placement, job)
        self.ledger.remove(job)
        self.limits.remove(job)

    def _hold(self, job: Job) -> None:
        self.fleet.allocate_placement(job.placement, job)
        self.ledger.add(job)
        self.limits.add(job)
