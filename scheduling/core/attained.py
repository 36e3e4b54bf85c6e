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
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

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
