"""Preempt only when it pays: the victims' displacement must cost less than the admitted gang gains.

Cost is the displacement cost the plan already carries (`preemption.displacement_cost_gpu_hours`):
each victim's GPUs × (work since its last checkpoint + the restart overhead). A job without a
checkpoint interval loses everything it ran, so it is an expensive victim.

Gain is the waiting the gang is spared, in the same unit: its GPUs × how long it would otherwise
wait for the victims' GPUs. Nobody knows when the victims end; with heavy-tailed durations a job
that has run for t is likely to run about t more, so the wait spared is taken as the shortest
current run among the victims (the soonest any of their GPUs would come back on their own).

Plans whose every victim has a lower priority than the gang are not weighed (`outranks_all`).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.core.model import Job, PreemptionPlan


def gain_gpu_hours(job: Job, victims: Iterable[Job], now: float) -> float:
    runs_s = [max(0.0, now - victim.started_at) for victim in victims if victim.started_at is not None]
    return job.gpus * min(runs_s, default=0.0) / 3600.0


def outranks_all(job: Job, victims: Iterable[Job]) -> bool:
    """Every victim has a lower priority: preemption by priority is the users' stated intent, as in Kueue,
    and is not weighed. The rule weighs the plans made for the scheduler's own ends: reclaiming quota
    and attained service, where all jobs are equal and only the waiting saved can justify the loss."""
    return all(victim.priority < job.priority for victim in victims)


def preemption_pays(plan: PreemptionPlan, job: Job, victims: Iterable[Job], now: float, margin: float = 1.0) -> bool:
    return unpaid_preemption(plan, job, victims, now, margin) is None


def unpaid_preemption(
    plan: PreemptionPlan, job: Job, victims: Iterable[Job], now: float, margin: float = 1.0
) -> str | None:
    """Why the plan does not pay (for the job's pending message), or None when `margin` × its cost is below
    its gain (SchedulerConfig.payoff_margin: the gain is an estimate, so it must clear the cost by a margin)."""
    gain = gain_gpu_hours(job, victims, now)
    if margin * plan.cost_gpu_hours < gain:
        return None
    return (f"preempting {len(plan.victims)} job(s) would lose {plan.cost_gpu_hours:.1f} GPU-hours "
            f"to spare it about {gain:.1f}: it does not pay")
