"""One admission cycle: the scheduling decisions for a snapshot, as a numbered recipe.

Over 400 lines for a reason: the recipe's steps share one cycle's state (fleet, ledger, verdicts, plans), so they
stay methods of one class beside the recipe that calls them; the rules they apply live in their own modules."""

from __future__ import annotations

import gc
import math
import heapq
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.core.accounts import FairShareAccounts, account_order_key
from scheduling.core.attained import ServiceOrder
from scheduling.core.borrowed import all_reclaimable_at_cost
from scheduling.core.defragmentation import (
    is_movable,
    jobs_on_nodes,
    moves_pay,
    natural_drain_s,
    nodes_emptied,
    plan_defragmentation,
)
from scheduling.core.drain import Drain, choose_drain, kept_off_drain
from scheduling.core.fairshare import borrows_without_checkpoints, queue_order_key, sort_queue
from scheduling.core.idle import idle_suspensions, is_flagged_idle
from scheduling.core.model import (
    FLEET,
    Admission,
    CheckpointWaits,
    CycleResult,
    Job,
    PendingReason,
    PendingVerdicts,
    PlannedPreemption,
    PreemptionPlan,
    QueueingStrategy,
    Snapshot,
    StateAfterCycle,
    Verdict,
)
from scheduling.core.payoff import (
    checkpoint_wait_message,
    checkpoint_wait_s,
    is_not_worth_planning,
    loses_whole_runs,
    natural_wait_s,
    outranks_all,
    soon_free_message,
    unpaid_preemption,
)
from scheduling.core.placement import fleet_state_for
from scheduling.core.preemption import needs_approval, plan_preemption, preemption_candidates, state_fingerprint
from scheduling.core.priority_limits import PriorityClassLimits
from scheduling.core.queue_stops import is_backing_off, stops_queue
from scheduling.core.quota import QuotaLedger, cohort_of
from scheduling.core.readiness import gangs_not_ready
from scheduling.core.reasons import fit_failure_message
from scheduling.core.starvation import starving_before


def failure_key(job: Job) -> tuple:
    """Jobs with one key get one verdict from quota and placement within a cycle: its queue and shape, and whether it
    may borrow (only a preemptible job may)."""
    return job.queue, job.flavor, job.pod_sets, job.topology, job.tolerations, job.is_preemptible


def run_admission_cycle(snapshot: Snapshot) -> CycleResult:
    """Decide which pending gangs start now, where, and who makes room for them.

    1. Evict gangs whose pods did not all become ready in time (they free their GPUs now), and, if the admin
       says so, suspend idle jobs while others wait.
    2. Build the fleet state and the quota ledger from what still holds GPUs.
    3. Order each queue's pending jobs: priority, then submit time.
    4. Serve queues by fair share, lowest first; take each queue's jobs in order and admit the
       first that passes quota and placement, then re-rank the queue. Under the admin's option
       drain_for_underserved_gangs, jobs that would borrow keep off the nodes draining for one gang (core.drain).
    5. For a job blocked by quota or placement, plan a preemption; execute plans that need no
       approval, propose the others.
    6. Everything else stays pending with its reason.
    """
    # The snapshot's objects (100,000 jobs) outlive the cycle: freezing them keeps the garbage
    # collector from re-scanning them each time the cycle's own allocations trigger a collection.
    gc.freeze()
    try:
        cycle = _Cycle(snapshot)
        cycle.evict_gangs_not_ready()
        cycle.build_state()
        cycle.order_queues()
        cycle.choose_drain()
        for queue_name in cycle.queues_by_fair_share():
            cycle.serve(queue_name)
        return cycle.result()
    finally:
        gc.unfreeze()


@dataclass
class _Cycle:
    snapshot: Snapshot
    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[PlannedPreemption] = field(default_factory=list)
    pending: PendingVerdicts = field(default_factory=PendingVerdicts)

    def __post_init__(self) -> None:
        self.config = self.snapshot.config
        self.evictions = []
        self.starving_before = starving_before(self.snapshot.now, self.config)
        self.service = ServiceOrder.at(self.config, self.snapshot.now)

    # 1 ---------------------------------------------------------------------------------------
    def evict_gangs_not_ready(self) -> None:
        """And, under the admin policy `suspend_idle_jobs`, the idle jobs others wait behind (core.idle)."""
        snapshot = self.snapshot
        self.evictions = gangs_not_ready(snapshot.admitted, snapshot.now, self.config)
        evicted = {e.job_id for e in self.evictions}
        ready = [job for job in snapshot.admitted if job.id not in evicted]
        self.evictions += idle_suspensions(ready, snapshot.pending, snapshot.queues, snapshot.now, self.config)

    # 2 ---------------------------------------------------------------------------------------
    def build_state(self) -> None:
        snapshot = self.snapshot
        evicted = {e.job_id for e in self.evictions}
        self.holding: dict[int, Job] = {job.id: job for job in snapshot.admitted if job.id not in evicted}
        self.fleet, self.ledger = _BASE_BY_THREAD.base.state_for(snapshot, self.holding)
        self.class_limits = PriorityClassLimits(snapshot.priority_class_caps, self.holding.values())
        self.protected: set[int] = set()
        # Capacity only shrinks while nothing is preempted, so a failure stays a failure until then.
        self.fit_failures: dict[tuple, Verdict] = {}
        self.drain: Drain | None = None
        self.quota_failures: dict[tuple, str] = {}
        self.known_failures: dict[tuple, tuple[PendingReason, str]] = {}
        self.preempting_queues: set[str] = set()
        self.plans_made = 0
        self.recheck_at: float | None = None
        self.declined: dict[int, str] = {}
        self.footprints: dict[int, tuple] = {}
        self.jobs_on_node: list[list[Job]] | None = None

    # 3 ---------------------------------------------------------------------------------------
    def order_queues(self) -> None:
        self.by_queue: dict[str, list[Job]] = {}
        for job in self.snapshot.pending:
            self.by_queue.setdefault(job.queue, []).append(job)
        for jobs in self.by_queue.values():
            sort_queue(jobs, self.service)

    def choose_drain(self) -> None:
        """SchedulerConfig.drain_for_underserved_gangs: the gang, if any, whose nodes jobs that would borrow keep off."""
        if self.config.drain_for_underserved_gangs:
            snapshot = self.snapshot
            if self.jobs_on_node is None:
                self.jobs_on_node = jobs_on_nodes(self.holding.values(), self.fleet)
            self.drain = choose_drain(self.by_queue, snapshot.queues, snapshot.historical_usage, self.ledger, self.fleet,
                                      self.jobs_on_node, snapshot.now)

    # 4 ---------------------------------------------------------------------------------------
    def queues_by_fair_share(self):
        """Yield queue names lowest share first, re-ranking a queue after each of its admissions. With one account per
        team (core.accounts) an admission moves every queue of the team: a queue whose key grew since it was pushed
        goes back into the heap instead of being served out of turn."""
        queues = self.snapshot.queues
        usage = self.snapshot.historical_usage
        service = self.service
        contested = self.cohorts_where_checkpointing_jobs_wait() if self.config.uncheckpointed_borrowers_last else set()
        lends_last = {name: cohort_of(queue) in contested for name, queue in queues.items()}

        def last(name: str, head: Job) -> bool:
            return lends_last[name] and borrows_without_checkpoints(head, self.ledger)

        if self.config.fair_share_per_team:
            accounts = FairShareAccounts(queues, usage)

            def key_of(name: str, head: Job) -> tuple:
                return account_order_key(queues[name], accounts, self.ledger, head, service, last=last(name, head))
        else:
            def key_of(name: str, head: Job) -> tuple:
                return queue_order_key(queues[name], self.ledger, usage.get(name, 0.0), head, service, last=last(name, head))

        heap = [(key_of(name, self.by_queue[name][0]), name) for name in self.by_queue if name in queues]
        heapq.heapify(heap)
        self.cursor = {name: 0 for name in self.by_queue}
        for name in self.by_queue:
            if name not in queues:
                for job in self.by_queue[name]:
                    self.pending.add(job.id, (PendingReason.QUOTA, f"queue {name} does not exist"))
        while heap:
            pushed, name = heapq.heappop(heap)
            jobs = self.by_queue[name]
            if self.config.fair_share_per_team and heap:
                current = key_of(name, jobs[self.cursor[name]])
                if current > pushed and current > heap[0][0]:
                    heapq.heappush(heap, (current, name))
                    continue
            self.last_admitted = False
            yield name
            if self.last_admitted and self.cursor[name] < len(jobs):
                heapq.heappush(heap, (key_of(name, jobs[self.cursor[name]]), name))

    def cohorts_where_checkpointing_jobs_wait(self) -> set[str]:
        """Where lent GPUs could go to a job that gives them back cheaply, so borrowers without checkpoints go last
        (SchedulerConfig.uncheckpointed_borrowers_last); where none waits there is nobody to prefer."""
        queues = self.snapshot.queues
        return {cohort_of(queues[name]) for name, jobs in self.by_queue.items()
                if name in queues and any(job.checkpoint_interval_s for job in jobs)}

    def serve(self, queue_name: str) -> None:
        """Walk the queue from its cursor until one job is admitted or the queue is done."""
        jobs = self.by_queue[queue_name]
        queue = self.snapshot.queues[queue_name]
        strict = queue.strategy is QueueingStrategy.STRICT_FIFO
        position, end = self.cursor[queue_name], len(jobs)
        while position < end:
            if not strict and queue_name in self.preempting_queues:
                position = self.skip_known_failures(jobs, position)
                if position == end:
                    break
            job = jobs[position]
            position += 1
            self.cursor[queue_name] = position
            blocked = self.consider(job)
            if blocked is None:
                self.last_admitted = True
                return
            self.pending.add(job.id, blocked)
            if stops_queue(job, blocked[0], queue, self.ledger, self.starving_before):
                self.block_rest_of_queue(queue_name, job)
                return
        self.cursor[queue_name] = position

    def skip_known_failures(self, jobs: list[Job], position: int) -> int:
        """Mark jobs pending while their shape is a known failure; the position of the first that is not.

        The hot path over 100,000 pending jobs, hence the hoisted lookups: once a queue has had its
        chance to preempt, the rest of it is one dictionary lookup and two appends per job.
        """
        get_known, starving_before = self.known_failures.get, self.starving_before
        add_id, add_verdict = self.pending.adders()
        end = len(jobs)
        while position < end:
            job = jobs[position]
            if job.backoff_until is not None or job.submitted_at <= starving_before:
                return position
            blocked = get_known(failure_key(job))
            if blocked is None:
                return position
            add_id(job.id)
            add_verdict(blocked)
            position += 1
        return position

    def block_rest_of_queue(self, queue_name: str, head: Job) -> None:
        jobs = self.by_queue[queue_name]
        if self.snapshot.queues[queue_name].strategy is QueueingStrategy.STRICT_FIFO:
            message = f"strict FIFO: waiting behind job {head.id} at the head of queue {queue_name}"
        else:
            waited_h = (self.snapshot.now - head.submitted_at) / 3600
            message = (f"waiting behind job {head.id} of queue {queue_name}, which has waited {waited_h:.1f} h "
                       f"and holds a reservation: later jobs no longer pass it")
        verdict = (PendingReason.ORDER, message)
        for job in jobs[self.cursor[queue_name] :]:
            self.pending.add(job.id, verdict)
        self.cursor[queue_name] = len(jobs)

    def consider(self, job: Job) -> Verdict | None:
        now = self.snapshot.now
        if is_backing_off(job, now):
            return PendingReason.BACKOFF, f"backing off until {job.backoff_until:.0f} after an eviction"
        over_class_cap = self.class_limits.check(job)  # waits, never preempts: checked before the shape caches
        if over_class_cap is not None:
            return over_class_cap
        # Capacity and quota only shrink while nothing is preempted, so a failure of one queue and
        # shape stays a failure until forget_failures(); 100,000 pending jobs of a few shapes cost a
        # few analyses and one dictionary lookup each.
        key = failure_key(job)
        known = self.known_failures.get(key)
        if known is None:
            known = self.check_quota_and_fit(job)
            if known is None:
                return None
            self.known_failures[key] = known
        if job.queue in self.preempting_queues or known[0] is PendingReason.ORDER:
            return known
        with self.fleet.holding_back(self.drained_for(job)):
            return self.try_preemption(job, *known)

    def drained_for(self, job: Job) -> tuple[int, ...]:
        """The nodes the job keeps off: those of the cycle's drain when the job would borrow (core.drain)."""
        if self.drain is None or not self.ledger.would_borrow(job):
            return ()
        return self.drain.nodes

    def check_quota_and_fit(self, job: Job) -> Verdict | None:
        """Admit the job if it passes quota and placement; else the reason, with its message."""
        quota_key = (job.queue, job.flavor, job.gpus, job.is_preemptible)  # only a preemptible job may borrow
        message = self.quota_failures.get(quota_key)
        if message is not None:
            return PendingReason.QUOTA, message
        check = self.ledger.check(job)
        if not check.fits:
            self.quota_failures[quota_key] = message = check.message(job.queue)
            return PendingReason.QUOTA, message
        drained = self.drained_for(job)
        shape = (job.shape, "drained") if drained else job.shape
        known = self.fit_failures.get(shape)
        if known is not None:
            return known
        with self.fleet.holding_back(drained):
            placement = self.fleet.place(job)
        if placement is None:
            if drained and self.fleet.fits(job):
                known = PendingReason.ORDER, kept_off_drain(self.drain, self.fleet)
            else:
                known = PendingReason.FIT, fit_failure_message(job, self.fleet)
            self.fit_failures[shape] = known
            return known
        self.admit(job, self.fleet.commit(placement, self.snapshot.now), check.is_borrowing, preempted=())
        return None

    # 5 ---------------------------------------------------------------------------------------
    def try_preemption(self, job: Job, reason: PendingReason, message: str) -> Verdict | None:
        # Like Kueue, only a queue's first blocked job may preempt in a cycle: planning is the
        # expensive step, and the jobs behind it are served by the next cycle.
        self.preempting_queues.add(job.queue)
        queue = self.snapshot.queues[job.queue]
        if not self.config.preemption_enabled or not queue.preemption.may_preempt_within_queue:
            return reason, message
        if reason is PendingReason.FIT and self.config.defragment_for_owed_gangs:
            moves = self.plan_moves(job)
            if moves is not None:
                return self.carry_out(job, moves, message, f"moving {len(moves.plan.victims)} checkpointing job(s) "
                                                           f"off partly used nodes")
        awaiting = self.snapshot.awaiting_plans.get(job.id)
        if awaiting is None and self.plans_made >= self.config.max_preemption_plans_per_cycle:
            return reason, message
        now = self.snapshot.now
        candidates = preemption_candidates(job, self.snapshot.queues, self.holding.values(), self.ledger,
                                           protected=self.protected, now=now, config=self.config)
        if not candidates:
            return reason, message
        weighs = self.config.preempt_only_when_it_pays
        if (weighs and not any(c.checkpoint_interval_s for c in candidates) and not outranks_all(job, candidates)
                and not any(is_flagged_idle(c, now, self.config.idle_grace_s) for c in candidates)):
            # (An idle candidate loses nothing, so a plan may pay however soon GPUs come back; a squatter's run
            # is reclaimed at its cost only when they would not come back soon on their own.)
            # Every plan would lose whole runs, so its gain is capped by the natural wait: when even
            # the cheapest conceivable plan could not pay, skip planning.
            lacking, natural_wait = self.natural_wait(job, reason)
            if is_not_worth_planning(job, lacking, natural_wait, self.config.restart_overhead_s,
                                     self.config.payoff_margin):
                return self.decline(job, reason, message, soon_free_message(natural_wait))
        planned = self.plan_or_keep(job, reason, candidates, awaiting, lambda: plan_preemption(
            job, candidates=candidates, fleet=self.fleet, ledger=self.ledger, now=now, config=self.config,
            reason=reason, footprints=self.footprints,
        ))
        if planned is None:
            return reason, message
        plan = planned.plan
        victims = [self.holding[v.job_id] for v in plan.victims]
        if weighs and not outranks_all(job, victims) and not all_reclaimable_at_cost(victims, job, now, self.config):
            spared_at_most = self.natural_wait(job, reason)[1] if loses_whole_runs(victims) else math.inf
            unpaid = unpaid_preemption(plan, job, victims, self.snapshot.now, self.config.payoff_margin, spared_at_most)
            if unpaid is not None:
                return self.decline(job, reason, message, unpaid)
            wait_s = self.checkpoint_wait(job, victims, candidates) if self.waits_for_checkpoints(job, victims) else None
            if wait_s is not None:
                self.recheck_at = min(self.recheck_at or math.inf, now + wait_s)
                return self.decline(job, reason, message, checkpoint_wait_message(plan, wait_s))
        return self.carry_out(job, planned, message, f"a preemption of {len(plan.victims)} job(s)")

    def decline(self, job: Job, reason: PendingReason, message: str, why: str) -> Verdict:
        """Leave the job pending although preempting could make room: `why` (the payoff rule's words) goes into its
        verdict and into CycleResult.declined, so that its explanation does not offer the plan as one that runs."""
        self.declined[job.id] = why
        return reason, f"{message}; {why}"

    def waits_for_checkpoints(self, job: Job, victims: list[Job]) -> bool:
        """Whether the paying plan may wait for a checkpoint (SchedulerConfig.preempt_at_checkpoints)."""
        waits = self.config.preempt_at_checkpoints
        if waits is CheckpointWaits.OWN_QUEUE:
            return all(victim.queue == job.queue for victim in victims)
        return waits is CheckpointWaits.ALL

    def checkpoint_wait(self, job: Job, victims: list[Job], candidates: list[Job]) -> float | None:
        """How long the paying plan waits for a checkpoint (SchedulerConfig.preempt_at_checkpoints), or None: the
        wait is the gang's and that of every job its queue serves after it."""
        queued = self.by_queue[job.queue]
        behind = (queued[i] for i in range(self.cursor[job.queue], len(queued)))
        return checkpoint_wait_s(job, victims, self.snapshot.now, candidates, self.config.restart_overhead_s, behind)

    def carry_out(self, job: Job, planned: PlannedPreemption, message: str, what: str) -> Verdict | None:
        """Run the plan and admit the job, or leave it proposed to an admin (`what`: the plan, for the job's message)."""
        plan = planned.plan
        self.preemptions.append(planned)
        if planned.needs_approval:
            return (
                PendingReason.AWAITING_APPROVAL,
                f"{message}; {what} costing {plan.cost_gpu_hours:.1f} "
                f"GPU-hours ({', '.join(plan.teams_affected)}) awaits an admin's approval",
            )
        for victim in plan.victims:
            victim_job = self.holding.pop(victim.job_id)
            self.fleet.release_placement(victim_job.placement, victim_job)
            self.ledger.remove(victim_job)
            self.class_limits.remove(victim_job)
        self.forget_failures()
        placement = self.fleet.place(job, within=self.fleet.domain_by_key[plan.domain])
        check = self.ledger.check(job)
        if placement is None or not check.fits:  # pragma: no cover - the plan was checked on this state
            raise AssertionError(f"preemption plan for job {job.id} does not make room")
        self.admit(job, self.fleet.commit(placement, self.snapshot.now), check.is_borrowing,
                   preempted=tuple(v.job_id for v in plan.victims))
        return None

    def plan_moves(self, job: Job) -> PlannedPreemption | None:
        """A defragmentation that pays, for a gang its own nominal quota holds (SchedulerConfig.defragment_for_owed_gangs)
        and that only fragmentation keeps out: enough GPUs of its kind are free, scattered over partly used nodes."""
        fleet = self.fleet
        classes = fleet.tolerated_classes(job)
        if self.ledger.would_borrow(job) or fleet.free_gpus_in(fleet.domain_by_key[FLEET], classes) < job.gpus:
            return None
        movable = [j for j in self.holding.values() if is_movable(j, fleet)]
        if not movable:
            return None
        if self.jobs_on_node is None:
            self.jobs_on_node = jobs_on_nodes(self.holding.values(), fleet)
        now, overhead = self.snapshot.now, self.config.restart_overhead_s
        planned = self.plan_or_keep(job, PendingReason.FIT, movable, self.snapshot.awaiting_plans.get(job.id), lambda: (
            found.plan if (found := plan_defragmentation(job, fleet, self.jobs_on_node, now=now,
                                                         restart_overhead_s=overhead)) else None
        ))
        if planned is None:
            return None
        moved = [self.holding[v.job_id] for v in planned.plan.victims]
        drain = natural_drain_s(fleet, self.jobs_on_node, classes, nodes_emptied(moved), now)
        if not moves_pay(planned.plan, job, drain, self.config.payoff_margin):
            return None
        return planned

    def natural_wait(self, job: Job, reason: PendingReason) -> tuple[int, float]:
        """The GPUs the job lacks and how long until as many come back on their own (core.payoff): of its
        cohort's quota when quota blocks it, of its flavor's nodes when it does not fit. A fit failure
        with enough free GPUs in all is fragmentation: a node's worth must come back."""
        queues = self.snapshot.queues
        if reason is PendingReason.QUOTA:
            lacking = self.ledger.check(job).short_by
            cohort = cohort_of(queues[job.queue])
            holders = [h for h in self.holding.values()
                       if h.flavor == job.flavor and h.queue in queues and cohort_of(queues[h.queue]) == cohort]
        else:
            free = self.fleet.free_gpus_in(self.fleet.domain_by_key[FLEET], self.fleet.tolerated_classes(job))
            lacking = job.gpus - free
            if lacking <= 0:
                lacking = max(pod_set.gpus_per_pod for pod_set in job.pod_sets)
            holders = [h for h in self.holding.values() if h.flavor == job.flavor]
        return lacking, natural_wait_s(lacking, holders, self.snapshot.now)

    def plan_or_keep(
        self, job: Job, reason: PendingReason, candidates: list[Job], awaiting: PlannedPreemption | None,
        planner: Callable[[], PreemptionPlan | None],
    ) -> PlannedPreemption | None:
        """The head's plan: the one awaiting an admin while the state it was planned on holds (that costs
        no planning budget, so the heads behind it get their turn), else a new one by `planner` from
        `candidates` while the budget lasts."""
        approved = self.snapshot.approved_preemptions.get(job.id)
        is_still_proposable = (
            awaiting is not None
            and awaiting.plan.victim_ids <= {c.id for c in candidates}
            and needs_approval(awaiting.plan, job, self.config, approved)
        )
        if is_still_proposable:
            fingerprint = state_fingerprint(job, reason, candidates, self.ledger, self.fleet, awaiting.plan.domain)
            if fingerprint == awaiting.fingerprint:
                return awaiting
        if self.plans_made >= self.config.max_preemption_plans_per_cycle:
            # Out of budget: a changed state's plan stays proposed as it is until the head's turn comes.
            return awaiting if is_still_proposable else None
        self.plans_made += 1
        plan = planner()
        if plan is None:
            return None
        if not needs_approval(plan, job, self.config, approved):
            return PlannedPreemption(plan, False)
        return PlannedPreemption(plan, True, state_fingerprint(job, reason, candidates, self.ledger, self.fleet, plan.domain))

    def forget_failures(self) -> None:
        self.jobs_on_node = None
        self.fit_failures.clear()
        self.quota_failures.clear()
        self.known_failures.clear()

    def admit(self, job: Job, placement, is_borrowing: bool, preempted: tuple[int, ...]) -> None:
        self.ledger.add(job)
        self.class_limits.add(job)
        self.protected.add(job.id)
        self.admissions.append(Admission(job.id, placement, is_borrowing, preempted))

    def result(self) -> CycleResult:
        return CycleResult(
            admissions=tuple(self.admissions),
            preemptions=tuple(self.preemptions),
            evictions=tuple(self.evictions),
            pending=self.pending,
            state_after=StateAfterCycle(self.fleet, self.ledger),
            recheck_at=self.recheck_at,
            declined=self.declined,
        )


class _BaseState:
    """The fleet state and quota ledger of the last snapshot's holding jobs, kept between cycles.

    A cycle starts from a copy. When the next snapshot has the same node tuple and queue mapping
    (the same objects: the simulator keeps both; snapshots are treated as immutable), only the jobs
    that started or stopped since are applied, instead of rebuilding from every node and every
    running job. The result is the same as a rebuild; only the time differs.
    """

    def __init__(self) -> None:
        self.nodes = None
        self.queues = None

    def state_for(self, snapshot: Snapshot, holding: dict[int, Job]):
        config = snapshot.config
        placement_rules = (config.topology_aware, config.single_pods_fleet_wide, config.single_pods_beside_long_runners)
        if (
            self.nodes is not snapshot.nodes
            or self.queues is not snapshot.queues
            or self.topology != snapshot.topology
            or self.placement_rules != placement_rules
        ):
            self.nodes, self.queues = snapshot.nodes, snapshot.queues
            self.topology, self.placement_rules = snapshot.topology, placement_rules
            self.fleet = fleet_state_for(snapshot)
            self.ledger = QuotaLedger(snapshot.queues)
            self.jobs: dict[int, Job] = {}
        fleet, ledger, jobs = self.fleet, self.ledger, self.jobs
        changed = [job_id for job_id, job in jobs.items() if holding.get(job_id) is not job]
        for job_id in changed:
            job, now = jobs[job_id], holding.get(job_id)
            if now is None or _holding_key(now) != _holding_key(job):
                fleet.release_placement(job.placement, job)
                ledger.remove(job)
                del jobs[job_id]
            else:
                jobs[job_id] = now
        for job_id in holding.keys() - jobs.keys():
            job = holding[job_id]
            fleet.allocate_placement(job.placement, job)
            ledger.add(job)
            jobs[job_id] = job
        return fleet.copy(), ledger.copy()


def _holding_key(job: Job) -> tuple:
    return (job.placement, job.queue, job.flavor, job.pod_sets, job.started_at)


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.base = _BaseState()


_BASE_BY_THREAD = _PerThread()
"""One base state per thread: a web worker's what-if preview never races the reconciler's pass."""
