"""Idle allocations: jobs that hold GPUs they do not use ("90 % allocated, 30 % used"), and the rule that acts on them.

A job is *flagged idle* once its GPUs have been used below the idle threshold for the grace period
(`SchedulerConfig.idle_grace_s`; who measures use — DCGM live, the trace in the simulator — sets
`Job.idle_since`). A flagged job is the first victim for any blocked job of its cohort, whatever its
priority and whether or not its queue borrows (core.preemption), and such a plan is not weighed by the
payoff rule: GPUs nobody uses are lost to nobody. Holding GPUs "just in case" therefore buys nothing
while anyone else waits, and the held time still counts in the team's fair-share usage (allocation,
never use, is what the usage counts).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.core.model import Job


def is_flagged_idle(job: Job, now: float, grace_s: float) -> bool:
    return job.idle_since is not None and now - job.idle_since >= grace_s


def all_flagged_idle(jobs: Iterable[Job], now: float, grace_s: float) -> bool:
    """True for a non-empty set of jobs every one of which is flagged idle."""
    jobs = list(jobs)
    return bool(jobs) and all(is_flagged_idle(job, now, grace_s) for job in jobs)


def working_until(job: Job, now: float) -> float:
    """The end of the job's useful work so far: now, or when it went idle (work after that is not work)."""
    return now if job.idle_since is None else min(now, job.idle_since)
