"""Readiness: a gang whose pods are not all running in time is evicted and requeued with backoff."""

from __future__ import annotations

from scheduling.core.model import Eviction, Job, SchedulerConfig


def backoff_s(evictions: int, config: SchedulerConfig) -> float:
    """base, 2·base, 4·base, … capped: the wait after the `evictions`-th eviction (1-based)."""
    return min(config.backoff_base_s * 2 ** max(0, evictions - 1), config.backoff_max_s)


def gangs_not_ready(admitted: tuple[Job, ...], now: float, config: SchedulerConfig) -> list[Eviction]:
    evictions = []
    for job in admitted:
        if job.are_pods_ready or job.admitted_at is None:
            continue
        waited_s = now - job.admitted_at
        if waited_s >= config.pods_ready_timeout_s:
            delay = backoff_s(job.evictions + 1, config)
            evictions.append(
                Eviction(
                    job_id=job.id,
                    backoff_until=now + delay,
                    message=(
                        f"pods not all running {waited_s:.0f}s after admission "
                        f"(timeout {config.pods_ready_timeout_s:.0f}s); requeued, retry in {delay:.0f}s"
                    ),
                )
            )
    return evictions
