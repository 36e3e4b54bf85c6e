"""Attained service: GPU-seconds a job has already run, in a few discrete levels (Tiresias' 2D-LAS).

No scheduler knows how long a job will run, but on every trace we replay durations are heavy-tailed:
most jobs are short, and a job that has already run long is likely to run long still. Serving the
jobs with the least attained service first — GPUs × time run, so a wide gang ages as fast as its
width — lets the many short jobs through without knowing which they are. The service is cut into
levels (`SchedulerConfig.service_levels_gpu_h`): jobs of one level keep their FIFO order, so the
order does not churn every time a running job's service grows, and a running job is a victim for
a pending one only once it sits a whole level above it — and only if it checkpoints. A job without
checkpoints loses everything it ran when stopped, and its long attained service is exactly what makes
it likely to be nearly done: on the policy suite, stopping such jobs for newcomers threw away
thousands of GPU-hours and lengthened waits (docs/simulation.md). It can still be reclaimed when it
borrows, where the payoff rule weighs that loss.

A job stopped after a long run waits behind every fresh job of its queue, and on a busy fleet fresh jobs never
stop coming: as Tiresias' STARVELIMIT does, a pending job that has waited `SchedulerConfig.promote_after_waiting`
times as long as it has run goes back to the first level (`ServiceOrder`). Only its place in the queue changes:
which jobs it may preempt for attained service, and which may preempt it, still go by the service it has attained.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.core.model import Job, SchedulerConfig


def attained_gpu_s(job: Job, now: float) -> float:
    """Earlier runs' GPU-seconds, plus the current run's when the job holds GPUs and has started."""
    if job.started_at is None:
        return job.attained_gpu_s
    return job.attained_gpu_s + job.gpus * max(0.0, now - job.started_at)


def service_level(gpu_s: float, levels_gpu_h: tuple[float, ...]) -> int:
    """0 below the first threshold, 1 below the second, … (thresholds in GPU-hours, ascending)."""
    return bisect_right(levels_gpu_h, gpu_s / 3600.0)


def level_of(job: Job, now: float, levels_gpu_h: tuple[float, ...]) -> int:
    return service_level(attained_gpu_s(job, now), levels_gpu_h) if levels_gpu_h else 0


@dataclass(frozen=True, slots=True)
class ServiceOrder:
    """How attained service ranks pending jobs at one moment: the levels, and when a job that waited long goes
    back to the first one."""

    levels_gpu_h: tuple[float, ...] = ()
    promote_after_waiting: float | None = None
    """A job goes back to level 0 once it has been pending this many times as long as it has run; None: never."""
    now: float = 0.0

    @classmethod
    def at(cls, config: SchedulerConfig, now: float) -> "ServiceOrder":
        return cls(config.service_levels_gpu_h, config.promote_after_waiting, now)

    def pending_level(self, job: Job) -> int:
        """The level a pending job ranks at in its queue: 0 without levels, for a fresh job, or once promoted."""
        if not self.levels_gpu_h or not job.attained_gpu_s or self.is_promoted(job):
            return 0
        return service_level(job.attained_gpu_s, self.levels_gpu_h)

    def is_promoted(self, job: Job) -> bool:
        """The pending job ran before and has since spent `promote_after_waiting` times its run time pending."""
        if self.promote_after_waiting is None or not job.attained_gpu_s:
            return False
        ran_s = job.attained_gpu_s / max(job.gpus, 1)
        return self.now - job.submitted_at - ran_s >= self.promote_after_waiting * ran_s


NO_SERVICE_ORDER = ServiceOrder()
"""Priority and FIFO only: Job.queue_order."""


def served_longer(victim: Job, job: Job, now: float, levels_gpu_h: tuple[float, ...]) -> bool:
    """The running `victim` sits a whole service level above the pending `job`, at no higher priority."""
    return bool(levels_gpu_h) and victim.priority <= job.priority and (
        level_of(victim, now, levels_gpu_h) > level_of(job, now, levels_gpu_h)
    )


def served_longer_victims(
    job: Job, holding: Iterable[Job], now: float, config: SchedulerConfig, *, protected: set[int], already: list[Job]
) -> list[Job]:
    """Running jobs of `job`'s queue that checkpoint and sit a whole service level above it, not yet
    among the candidates."""
    levels = config.service_levels_gpu_h
    if not levels:
        return []
    known = {other.id for other in already}
    return [
        other
        for other in holding
        if other.queue == job.queue
        and other.flavor == job.flavor
        and other.is_preemptible
        and other.checkpoint_interval_s
        and other.id not in protected
        and other.id != job.preempted_by
        and other.id not in known
        and served_longer(other, job, now, levels)
    ]
