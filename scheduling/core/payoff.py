"""Preempt only when it pays: the victims' displacement must cost less than the admitted gang gains.

Cost is the displacement cost the plan already carries (`preemption.displacement_cost_gpu_hours`):
each victim's GPUs × (work since its last checkpoint + the restart overhead). A job without a
checkpoint interval loses everything it ran, so it is an expensive victim.

Gain is the waiting the gang is spared, in the same unit: its GPUs × how long it would otherwise
wait. Nobody knows when a running job ends; with heavy-tailed durations a job that has run for t
is likely to run about t more, so the gang would wait about the shortest current run among the
victims.

When a victim has no checkpoint, a wrong guess throws away its whole run, so the gain is then
taken at its lowest: also no more than the time until as many GPUs as the gang lacks come back
anywhere it could use them (`natural_wait_s`). A busy fleet full of young jobs frees GPUs soon,
and preempting a long uncheckpointed run for a wait that short loses work for nothing. Victims
that checkpoint lose at most one interval; for them the first estimate stands, which lets the
least-served jobs through (core.attained) the way Tiresias does. On the policy suite the low
estimate for every plan made the checkpointed rows' waits up to 1.9× longer (docs/simulation.md).

Plans whose every victim has a lower priority than the gang are not weighed (`outranks_all`).

A plan that pays may pay more a little later: a victim stopped at its next checkpoint loses only the restart. When the
victims' work since their last checkpoints outweighs the wait until the soonest checkpoint that could change the plan
(the gang's, and that of the jobs queued behind it), the gang waits for it (`checkpoint_wait_s`), and the cycle then
plans again: by default for plans within the gang's own queue (SchedulerConfig.preempt_at_checkpoints).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scheduling.core.idle import working_until
from scheduling.core.model import Job, PreemptionPlan
from scheduling.core.preemption import work_since_checkpoint_s


def natural_wait_s(lacking_gpus: int, holders: Iterable[Job], now: float) -> float:
    """How long until `lacking_gpus` come back on their own, each holder taken to run as long again as it
    has run: the holders' runs in ascending order, the first at which their GPUs add up (inf: never)."""
    if lacking_gpus <= 0:
        return 0.0
    runs = sorted((max(0.0, now - h.started_at), h.gpus) for h in holders if h.started_at is not None)
    freed = 0
    for run_s, gpus in runs:
        freed += gpus
        if freed >= lacking_gpus:
            return run_s
    return math.inf


def loses_whole_runs(victims: Iterable[Job]) -> bool:
    """Some victim has no checkpoint interval: stopping it loses everything it ran."""
    return any(not victim.checkpoint_interval_s for victim in victims)


def is_not_worth_planning(job: Job, lacking_gpus: int, natural_wait: float, restart_overhead_s: float,
                          margin: float) -> bool:
    """No plan can pay: freeing `lacking_gpus` costs at least their restart overhead, and the gain is at
    most the gang's GPUs × the natural wait (when every candidate would lose its whole run). Checked
    before planning, the expensive step."""
    return job.gpus * natural_wait <= margin * lacking_gpus * restart_overhead_s


def gain_gpu_hours(job: Job, victims: Iterable[Job], now: float, natural_wait: float = math.inf) -> float:
    runs_s = [max(0.0, now - victim.started_at) for victim in victims if victim.started_at is not None]
    return job.gpus * min(min(runs_s, default=0.0), natural_wait) / 3600.0


def outranks_all(job: Job, victims: Iterable[Job]) -> bool:
    """Every victim has a lower priority: preemption by priority is the users' stated intent, as in Kueue,
    and is not weighed. The rule weighs the plans made for the scheduler's own ends: reclaiming quota
    and attained service, where all jobs are equal and only the waiting saved can justify the loss."""
    return all(victim.priority < job.priority for victim in victims)


def preemption_pays(plan: PreemptionPlan, job: Job, victims: Iterable[Job], now: float, margin: float = 1.0,
                    natural_wait: float = math.inf) -> bool:
    return unpaid_preemption(plan, job, victims, now, margin, natural_wait) is None


def unpaid_preemption(
    plan: PreemptionPlan, job: Job, victims: Iterable[Job], now: float, margin: float = 1.0,
    natural_wait: float = math.inf,
) -> str | None:
    """Why the plan does not pay (for the job's pending message), or None when `margin` × its cost is below
    its gain (SchedulerConfig.payoff_margin: the gain is an estimate, so it must clear the cost by a margin)."""
    gain = gain_gpu_hours(job, victims, now, natural_wait)
    if margin * plan.cost_gpu_hours < gain:
        return None
    return (f"preempting {len(plan.victims)} job(s) would lose {plan.cost_gpu_hours:.1f} GPU-hours "
            f"to spare it about {gain:.1f}: it does not pay")


def checkpoint_wait_s(job: Job, victims: Iterable[Job], now: float, others: Iterable[Job] = (),
                      worth_s: float = 0.0, behind: Iterable[Job] = ()) -> float | None:
    """How long to wait for a checkpoint, when waiting loses less than stopping the victims now; None when it does
    not, or when a victim never reaches one (no checkpoint interval, or idle: it is not working towards one).

    Stopped now, each victim redoes its GPUs × its work since its last checkpoint; stopped at its next checkpoint, it
    redoes nothing, and the gang waits until the last of them. When another candidate (`others`) checkpoints sooner,
    the next cycle is then: it may make room at that moment for nothing but the restart. Checkpoints fall every
    interval from the start of the run (preemption.work_since_checkpoint_s). The wait is paid by the gang and by
    every job queued `behind` it: while the head waits, the admissions its queue makes after it wait too.

    Work since a checkpoint shorter than `worth_s` (the restart overhead) is not waited for: the restart costs more
    anyway, and a cycle seldom falls on the very second of a checkpoint (a reconciler on a beat), so the gang would
    otherwise chase one checkpoint after another.
    """
    unsaved_gpu_s = 0.0
    wait_s = 0.0
    for victim in victims:
        to_checkpoint = _to_next_checkpoint_s(victim, now)
        if to_checkpoint is None:
            return None
        since_checkpoint = victim.checkpoint_interval_s - to_checkpoint
        if since_checkpoint >= max(worth_s, 1.0):
            unsaved_gpu_s += victim.gpus * since_checkpoint
            wait_s = max(wait_s, to_checkpoint)
    sooner = (_to_next_checkpoint_s(other, now) for other in others)
    wait_s = min(wait_s, min((t for t in sooner if t is not None), default=math.inf))
    if unsaved_gpu_s <= job.gpus * wait_s:
        return None
    waiting_gpus = job.gpus
    for other in behind:
        waiting_gpus += other.gpus
        if unsaved_gpu_s <= waiting_gpus * wait_s:
            return None
    return wait_s


def _to_next_checkpoint_s(job: Job, now: float) -> float | None:
    """Seconds to the job's next checkpoint: its whole interval when it has just taken one (float error aside), None
    when it never will (no interval, not started, or idle: it is not working towards one)."""
    interval = job.checkpoint_interval_s
    if not interval or job.started_at is None or working_until(job, now) < now:
        return None
    since_checkpoint = work_since_checkpoint_s(job, now)
    return interval if min(since_checkpoint, interval - since_checkpoint) < 1.0 else interval - since_checkpoint


def checkpoint_wait_message(plan: PreemptionPlan, wait_s: float) -> str:
    return (f"preempting {len(plan.victims)} job(s) now would lose {plan.cost_gpu_hours:.1f} GPU-hours, mostly work since "
            f"their last checkpoint: it waits about {max(1, round(wait_s / 60))} min, until a job it may preempt "
            f"checkpoints")


def soon_free_message(natural_wait: float) -> str:
    return f"enough GPUs should come back on their own within about {natural_wait / 60:.0f} min: preempting would not pay"
