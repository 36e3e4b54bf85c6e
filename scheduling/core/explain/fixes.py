"""The fixes of a pending job, ranked by displacement (GPU-hours other tenants lose, then teams affected): wait, borrow,
raise a quota, uncordon / tolerate / repair nodes, defragment, preempt (the core's own plan on the same state), and
changes to the request that start it now."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from scheduling.core.defragmentation import plan_defragmentation
from scheduling.core.explain.diagnosis import Diagnosis
from scheduling.core.explain import messages
from scheduling.core.explain.facts import (
    MAX_NAMED, Action, FitFacts, Fix, HealthFacts, Level, NodeFacts, NodeReason, QuotaFacts, VictimFacts, VictimRule,
)
from scheduling.core.model import Job, Pending, PendingReason, PlannedPreemption, PreemptionPlan, Queue, Victim
from scheduling.core.preemption import (
    IDLE, RECLAIM, WITHIN_QUEUE, displacement_cost_gpu_hours, needs_approval, plan_preemption, preemption_candidates, rule_of,
)
from scheduling.core.quota import QuotaLimit, cohort_of, lendable

MAX_PREEMPTION_PLANS = 4
"""Preemption plans per explanation pass: the expensive fix (~0.1 s each at 1,250 nodes). Queue heads are
explained first, so the plans go to the jobs that may preempt next; other shapes list no preempt fix."""
MAX_RESHAPES = 16
"""Explanations per pass that also try a changed request (a smaller gang, no topology requirement, another flavor):
a few placements each, spent on the queue heads explained first."""


class Fixes:
    """The fixes of the pending jobs a Diagnosis describes, cached per shape; the preemption plans and reshapes
    within their budgets (spent on the jobs explained first)."""

    def __init__(self, diagnosis: Diagnosis, *, protected: Iterable[int] = (), plans: Iterable[PlannedPreemption] = (),
                 max_preemption_plans: int = MAX_PREEMPTION_PLANS, declined: Mapping[int, str] = {}) -> None:
        self.diagnosis = diagnosis
        self.snapshot = diagnosis.snapshot
        self.config = diagnosis.snapshot.config
        self.fleet = diagnosis.fleet
        self.ledger = diagnosis.ledger
        self.holding = diagnosis.holding
        self.protected = set(protected)
        self.plans = {p.plan.job_id: p for p in plans}
        self.declined = declined
        self.preemption_budget = max_preemption_plans
        self.reshape_budget = MAX_RESHAPES
        self._defrag_cache: dict[tuple, Fix | None] = {}
        self._preempt_cache: dict[tuple, Fix | None] = {}

    def fixes(self, job, queue, blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts, health: HealthFacts,
               never: bool, verdict: Pending | None) -> tuple[Fix, ...]:
        fixes: list[Fix] = []
        if blocking is None:
            return ()
        if not never:
            fixes.append(Fix(Action.WAIT, 0.0, (), False,
                             "wait: running jobs end at their runtime limits and the queue moves (see the estimated start)"))
        if blocking == Level.PRIORITY_CLASS:
            fixes.append(Fix(Action.LOWER_CLASS, 0.0, (), False,
                             f"resubmit at a lower priority class: {job.priority_class}'s cap does not apply there"))
        if not quota.fits:
            fixes.extend(self._quota_fixes(job, queue, quota))
        if blocking in (Level.NODES, Level.HEALTH) or (blocking == Level.FIT and health.count):
            fixes.extend(self._node_fixes(job, nodes, health))
        if blocking == Level.FIT and fit.fragmentation.is_fragmented:
            defrag = self._defragment(job)
            if defrag is not None:
                fixes.append(defrag)
        if blocking in (Level.QUOTA, Level.FIT, Level.NODES, Level.HEALTH):
            preempt = self._preempt(job, queue, blocking, verdict)
            if preempt is not None:
                fixes.append(preempt)
            fixes.extend(self._reshape_fixes(job, queue, blocking))
        ranked = sorted(enumerate(fixes), key=lambda item: (item[1].cost_gpu_hours, len(item[1].teams_affected), item[0]))
        return tuple(fix for _, fix in ranked)

    def _quota_fixes(self, job: Job, queue: Queue, quota: QuotaFacts) -> list[Fix]:
        fixes = []
        flavor_quota = queue.quotas.get(job.flavor)
        if quota.limit == QuotaLimit.BORROWING_LIMIT and flavor_quota is not None:
            after = quota.used + job.gpus
            pool_free = self.ledger.pool_free(cohort_of(queue), job.flavor)
            draw_now = max(0, quota.used - (flavor_quota.nominal - lendable(flavor_quota)))
            draw_after = max(0, after - (flavor_quota.nominal - lendable(flavor_quota)))
            if draw_after - draw_now <= pool_free:
                new_limit = after - flavor_quota.nominal
                lenders = tuple(sorted({self.snapshot.queues[name].team for name in self._lenders(queue, job.flavor)}))
                fixes.append(Fix(
                    Action.BORROW, 0.0, lenders, False,
                    f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} borrowing limit from "
                    f"{flavor_quota.borrowing_limit} to {new_limit}: the cohort {queue.cohort} can lend it now "
                    f"(idle quota of {', '.join(lenders) or 'the cohort'}, reclaimable by its owners)",
                ))
        elif quota.limit == QuotaLimit.NOT_PREEMPTIBLE:
            fixes.append(Fix(
                Action.RAISE_QUOTA, 0.0, (), False,
                f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} nominal quota by at least "
                f"{max(quota.short_by, 1)} (within the team's allotment); or resubmit the job preemptible, so it may borrow",
            ))
        elif quota.limit in (QuotaLimit.NOMINAL, QuotaLimit.NO_QUOTA):
            fixes.append(Fix(
                Action.RAISE_QUOTA, 0.0, (), False,
                f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} nominal quota by at least "
                f"{max(quota.short_by, 1)} (within the team's allotment), or joins a cohort to borrow",
            ))
        return fixes

    def _reshape_fixes(self, job: Job, queue: Queue, blocking: str) -> list[Fix]:
        """Changes to the request that start it now, paid for by the job alone: fewer pods, no topology
        requirement, another flavor. Each must pass the quota check and place on the real fleet."""
        if self.reshape_budget <= 0:
            return []
        self.reshape_budget -= 1
        fixes = []
        if job.topology.required and blocking == Level.FIT:
            relaxed = replace(job, topology=type(job.topology)(None, job.topology.preferred or job.topology.required))
            if self._starts_now(relaxed):
                fixes.append(Fix(
                    Action.RELAX_TOPOLOGY, 0.0, (), False,
                    f"drop the requirement that all pods share one {job.topology.required} (keep it as a preference): the "
                    f"gang fits across {job.topology.required}s now; the job pays with slower links between some ranks",
                ))
        smaller = self._largest_gang_now(job)
        if smaller is not None:
            pod_set = smaller.pod_sets[-1]
            fixes.append(Fix(
                Action.SHRINK, 0.0, (), False,
                f"shrink {pod_set.name} to {pod_set.count} pods ({smaller.gpus} GPUs, {job.gpus - smaller.gpus} fewer): that "
                f"gang fits quota and placement now; the job pays with fewer ranks and a longer run",
            ))
        for flavor in sorted({n.flavor for n in self.fleet.nodes} - {job.flavor}):
            other = replace(job, flavor=flavor)
            if other.flavor in (self.snapshot.queues[job.queue].quotas if job.queue in self.snapshot.queues else {}) and self._starts_now(other):
                fixes.append(Fix(
                    Action.OTHER_FLAVOR, 0.0, (), False,
                    f"resubmit on {flavor}: queue {queue.name} has quota and the fleet has room for the whole gang there now",
                ))
        return fixes

    def _starts_now(self, job: Job) -> bool:
        return self.ledger.fits(job) and self.diagnosis.fits(job, "actual")

    def _largest_gang_now(self, job: Job) -> Job | None:
        """The job with its last pod set cut to the most pods that start now (a bisection), if at least one does."""
        last = job.pod_sets[-1]
        low, high, best = 1, last.count - 1, None
        while low <= high:
            count = (low + high) // 2
            candidate = replace(job, pod_sets=(*job.pod_sets[:-1], last._replace(count=count)))
            if self._starts_now(candidate):
                best, low = candidate, count + 1
            else:
                high = count - 1
        return best

    def _lenders(self, queue: Queue, flavor: str) -> list[str]:
        cohort = cohort_of(queue)
        names = []
        for other in self.snapshot.queues.values():
            if other.name == queue.name or cohort_of(other) != cohort:
                continue
            quota = other.quotas.get(flavor)
            if quota is not None and self.ledger.usage(other.name, flavor) < quota.nominal and lendable(quota) > 0:
                names.append(other.name)
        return names

    def _node_fixes(self, job: Job, nodes: NodeFacts, health: HealthFacts) -> list[Fix]:
        fixes = []
        reasons = dict(nodes.reasons)
        if reasons.get(NodeReason.CORDONED) or reasons.get(NodeReason.NOT_READY):
            names = tuple(
                n.name for n in self.fleet.nodes
                if n.flavor == job.flavor and (n.is_cordoned or not n.is_ready)
            )
            fixes.append(Fix(
                Action.UNCORDON, 0.0, (), True,
                f"an admin uncordons or brings back {len(names)} {job.flavor} nodes "
                f"({reasons.get(NodeReason.CORDONED, 0)} cordoned, {reasons.get(NodeReason.NOT_READY, 0)} not ready)",
                nodes=names[:MAX_NAMED],
            ))
        if reasons.get(NodeReason.UNTOLERATED_TAINT):
            taints = sorted({f"{t.key}={t.value}:{t.effect}" for n in self.fleet.nodes if n.flavor == job.flavor
                             for t in n.taints if not any(tol.tolerates(t) for tol in job.tolerations)})
            fixes.append(Fix(
                Action.TOLERATE, 0.0, (), False,
                f"resubmit with a toleration for {', '.join(taints[:3])} "
                f"({reasons[NodeReason.UNTOLERATED_TAINT]} nodes carry it), if the job may run there",
            ))
        if health.count:
            on_broken = self.diagnosis.jobs_on(n.name for n in health.nodes)
            cost = sum(displacement_cost_gpu_hours(j, self.snapshot.now, self.config.restart_overhead_s) for j in on_broken)
            teams = tuple(sorted({j.team for j in on_broken}))
            fixes.append(Fix(
                Action.DRAIN_NODE, cost, teams, True,
                f"an admin drains and repairs {health.count} node(s) missing {health.missing_gpus} GPUs "
                f"({', '.join(b.name for b in health.nodes[:5])}); "
                + (f"{len(on_broken)} job(s) running there are requeued" if on_broken else "nothing runs there"),
                jobs=tuple(sorted(j.id for j in on_broken))[:MAX_NAMED],
                nodes=tuple(b.name for b in health.nodes[:MAX_NAMED]),
            ))
        return fixes

    def _defragment(self, job: Job) -> Fix | None:
        key = (job.shape, job.team)
        if key not in self._defrag_cache:
            self._defrag_cache[key] = self._defragment_fix(job)
        return self._defrag_cache[key]

    def _defragment_fix(self, job: Job) -> Fix | None:
        found = plan_defragmentation(job, self.fleet, self.diagnosis.node_jobs(), now=self.snapshot.now,
                                     restart_overhead_s=self.config.restart_overhead_s)
        if found is None:
            return None
        moved, nodes = found.moved, found.nodes
        return Fix(
            Action.DEFRAGMENT, found.plan.cost_gpu_hours, found.plan.teams_affected,
            needs_approval(found.plan, job, self.config, None),
            f"requeue {len(moved)} small checkpointable job(s) ({', '.join(f'#{j.id}' for j in moved[:5])}"
            f"{' …' if len(moved) > 5 else ''}) to free {len(nodes)} whole node(s) ({', '.join(nodes[:5])}"
            f"{' …' if len(nodes) > 5 else ''}); they resume from their last checkpoint elsewhere",
            jobs=tuple(j.id for j in moved[:MAX_NAMED]),
            nodes=tuple(nodes[:MAX_NAMED]),
        )

    def _preempt(self, job: Job, queue: Queue, blocking: str, verdict: Pending | None) -> Fix | None:
        planned = self.plans.get(job.id)
        if planned is not None:
            return self._preempt_fix(planned.plan, job, planned.needs_approval, proposed=True)
        if not self.config.preemption_enabled or not queue.preemption.may_preempt_within_queue:
            return None
        key = (job.queue, job.shape, job.priority)
        declined = self.declined.get(job.id, "")
        if key in self._preempt_cache and not declined:
            return self._preempt_cache[key]
        if self.preemption_budget <= 0:
            return None
        self.preemption_budget -= 1
        reason = PendingReason.QUOTA if blocking == Level.QUOTA else PendingReason.FIT
        plan = self.plan(job, reason)
        fix = None
        if plan is not None:
            approved = self.snapshot.approved_preemptions.get(job.id)
            fix = self._preempt_fix(plan, job, needs_approval(plan, job, self.config, approved), proposed=False,
                                    declined=declined)
        if declined or key not in self._preempt_cache:
            # The jobs behind a declined head of their shape share its answer: the same rule would decline them there.
            self._preempt_cache[key] = fix
        return fix

    def plan(self, job: Job, reason: PendingReason) -> PreemptionPlan | None:
        """The core's preemption plan for `job` on this state (what the cycle would plan, from the same candidates)."""
        candidates = preemption_candidates(job, self.snapshot.queues, self.holding.values(), self.ledger,
                                           protected=self.protected, now=self.snapshot.now, config=self.config)
        return plan_preemption(job, candidates=candidates, fleet=self.fleet, ledger=self.ledger, now=self.snapshot.now,
                               config=self.config, reason=reason)

    def _preempt_fix(self, plan: PreemptionPlan, job: Job, approval: bool, *, proposed: bool, declined: str = "") -> Fix:
        victims = tuple(self._victim(v, job) for v in plan.victims)
        idle = [v for v in victims if v.is_idle]
        listed = ", ".join(
            f"#{v.job_id} ({v.team}, {v.gpus} GPUs, {'idle, ' if v.is_idle else ''}{v.cost_gpu_hours:.1f} GPU-h)"
            for v in victims[:5]
        ) + (" …" if len(victims) > 5 else "")
        state = ("proposed, awaiting an admin's approval" if proposed and approval
                 else f"not run now: {declined}" if declined
                 else "needs an admin's approval" if approval else "runs automatically")
        now = self.snapshot.now
        if len(idle) == len(victims):  # a reclaim of hoarded GPUs: its cost is their restart, and work before they idled
            detail = (f"reclaim {messages.idle_jobs(idle, now)} in {plan.domain}: {listed}; "
                      f"{messages.idle_loss(idle, with_restart=True)}; {state}")
        else:
            detail = f"preempt {len(victims)} job(s) in {plan.domain}, {victim_rules(victims, now)}: {listed}; {state}"
        return Fix(Action.PREEMPT, plan.cost_gpu_hours, plan.teams_affected, approval, detail,
                   jobs=tuple(v.job_id for v in victims), victims=victims, declined=declined)

    def _victim(self, victim: Victim, job: Job) -> VictimFacts:
        """Why the core takes `victim` for `job` (core.preemption.rule_of on the job as it holds now) and the work it loses."""
        held = self.holding.get(victim.job_id)
        if held is None:  # gone since the plan was made: as the plan stands, all its cost counted as work
            rule = VictimRule.WITHIN_QUEUE if victim.queue == job.queue else VictimRule.RECLAIM
            return VictimFacts(victim.job_id, victim.queue, victim.team, victim.gpus, rule, victim.cost_gpu_hours,
                               lost_work_gpu_hours=victim.cost_gpu_hours)
        rule = RULES[rule_of(held, job, self.snapshot.now, self.config.idle_grace_s)]
        if rule == VictimRule.WITHIN_QUEUE and held.priority >= job.priority:
            rule = VictimRule.ATTAINED_SERVICE
        return VictimFacts(
            victim.job_id, victim.queue, victim.team, victim.gpus, rule, victim.cost_gpu_hours,
            lost_work_gpu_hours=displacement_cost_gpu_hours(held, self.snapshot.now, restart_overhead_s=0.0),
            idle_since=held.idle_since if rule == VictimRule.IDLE else None,
        )


RULES = {IDLE: VictimRule.IDLE, RECLAIM: VictimRule.RECLAIM, WITHIN_QUEUE: VictimRule.WITHIN_QUEUE}
"""core.preemption's rules by name."""


def victim_rules(victims: Sequence[VictimFacts], now: float) -> str:
    """Which rules chose the victims, idle jobs first, e.g. "taking 1 idle job of team speech (idle since 14:05 UTC),
    preempting 2 lower-priority jobs of its queue and reclaiming 16 GPUs lent to speech"."""
    idle = [v for v in victims if v.rule == VictimRule.IDLE]
    own = sum(1 for v in victims if v.rule == VictimRule.WITHIN_QUEUE)
    served = sum(1 for v in victims if v.rule == VictimRule.ATTAINED_SERVICE)
    lent: dict[str, int] = {}
    for victim in victims:
        if victim.rule == VictimRule.RECLAIM:
            lent[victim.queue] = lent.get(victim.queue, 0) + victim.gpus
    rules = []
    if idle:
        rules.append(f"taking {messages.idle_jobs(idle, now)}")
    if own:
        rules.append(f"preempting {messages.count(own, 'lower-priority job')} of its queue")
    if served:
        rules.append(f"preempting {messages.count(served, 'job')} of its queue that ran a whole service level longer")
    if lent:
        rules.append("reclaiming " + ", ".join(f"{gpus} GPUs lent to {name}" for name, gpus in sorted(lent.items())))
    return ", ".join(rules[:-1]) + " and " + rules[-1] if len(rules) > 1 else "".join(rules)
