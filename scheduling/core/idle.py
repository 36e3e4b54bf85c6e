"""Idle allocations: jobs that hold GPUs they do not use ("90 % allocated, 30 % used"), and the rule that acts on them.

A job is *flagged idle* once its GPUs have been used below the idle threshold for the grace period
(`SchedulerConfig.idle_grace_s`; who measures use — DCGM live, the trace in the simulator — sets
`Job.idle_since`). A flagged job is the first victim for any blocked job of its cohort, whatever its
priority and whether or not its queue borrows (core.preemption), and such a plan is not weighed by the
payoff rule: GPUs nobody uses are lost to nobody. Holding GPUs "just in case" therefore buys nothing
while anyone else waits, and the held time still counts in the team's fair-share usage (allocation,
never use, is what the usage counts).

An admin may go further (`SchedulerConfig.suspend_idle_jobs`): a flagged job is then suspended — evicted
back to its queue with the readiness backoff — as soon as a job of its cohort waits for its flavor, even
when no plan would pick it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduling.core.model import Eviction, Job, Queue, SchedulerConfig
from scheduling.core.quota import cohort_of
from scheduling.core.readiness import backoff_s


def is_flagged_idle(job: Job, now: float, grace_s: float) -> bool:
    return job.idle_since is not None and now - job.idle_since >= grace_s


def working_until(job: Job, now: float) -> float:
    """The end of the job's useful work so far: now, or when it went idle (work after that is not work)."""
    return now if job.idle_since is None else min(now, job.idle_since)


def idle_suspensions(holding: Iterable[Job], pending: Iterable[Job], queues: Mapping[str, Queue], now: float,
                     config: SchedulerConfig) -> list[Eviction]:
    """The flagged idle jobs to suspend now: those whose cohort has a job waiting for their flavor (none unless the
    admin policy `suspend_idle_jobs` is on)."""
    if not config.suspend_idle_jobs:
        return []
    flagged = [job for job in holding if job.queue in queues and is_flagged_idle(job, now, config.idle_grace_s)]
    if not flagged:
        return []
    waiting = {(cohort_of(queues[job.queue]), job.flavor) for job in pending
               if job.queue in queues and (job.backoff_until is None or job.backoff_until <= now)}
    suspensions = []
    for job in flagged:
        if (cohort_of(queues[job.queue]), job.flavor) in waiting:
            delay = backoff_s(job.evictions + 1, config)
            idle_min = (now - job.idle_since) / 60
            suspensions.append(Eviction(job.id, now + delay, f"suspended: idle for {idle_min:.0f} min while jobs of its "
                                                             f"cohort wait for {job.flavor}; requeued, retry in {delay:.0f}s"))
    return suspensions
