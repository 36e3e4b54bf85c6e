"""Where a queue stops: the blocked job the rest of its queue waits behind, and how far into a queue a cycle reaches.

The cycle stops a queue at its first blocked job when the queue is strict FIFO, and at a blocked job that starves
(core.starvation) when it is best effort: the later jobs of the queue wait behind it (stops_queue). A job that only
backs off after an eviction, or waits for its priority class's cap, is passed over and stops nothing.

The simulator and the forecast pass a cycle that frees no GPUs only the part of a strict FIFO queue the cycle can
reach (strict_fifo_reach): the same rule, seen before the cycle runs, so the two cannot drift from the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from scheduling.core.model import Job, PendingReason, Queue, QueueingStrategy
from scheduling.core.quota import QuotaLedger
from scheduling.core.starvation import is_starving

PASSED_OVER = (PendingReason.BACKOFF, PendingReason.PRIORITY_CLASS)
"""Verdicts that keep a job waiting without holding back the jobs behind it."""


def stops_queue(job: Job, reason: PendingReason, queue: Queue, ledger: QuotaLedger, starving_before: float) -> bool:
    """Whether the blocked `job` (blocked for `reason`) holds back the rest of its queue."""
    if reason in PASSED_OVER:
        return False
    return queue.strategy is QueueingStrategy.STRICT_FIFO or is_starving(job, queue, ledger, starving_before)


def is_backing_off(job: Job, now: float) -> bool:
    """Evicted, and its backoff has not ended: the cycle passes it over (PendingReason.BACKOFF)."""
    return job.backoff_until is not None and job.backoff_until > now


def may_be_passed_over(job: Job, now: float, class_caps: Mapping[str, int]) -> bool:
    """Whether the cycle may pass over the job without it stopping its queue (PASSED_OVER): it backs off, or its
    priority class has a cap it may be over."""
    return is_backing_off(job, now) or job.priority_class in class_caps


def strict_fifo_reach(
    jobs: Iterable[Job],
    *,
    room_gpus: int,
    now: float,
    class_caps: Mapping[str, int],
    may_start: Callable[[Job], bool] | None = None,
) -> Iterator[Job]:
    """A strict FIFO queue's jobs, in the core's order, as far as a cycle that frees no GPUs can reach into it: up to
    and including the first job that surely stops it.

    Each job the cycle does not pass over either starts, taking its GPUs, or stops the queue. So the queue stops at
    the latest at the first such job whose shape may not start (`may_start`: quota and placement, checked before the
    cycle; None: any may), or with which such jobs need more than `room_gpus` (the free GPUs, or less) in all. The
    jobs after it would only be reported waiting behind it: a cycle passed this much admits what it would admit
    passed the whole queue."""
    left = room_gpus
    for job in jobs:
        yield job
        if not may_be_passed_over(job, now, class_caps):
            left -= job.gpus
            if left < 0 or (may_start is not None and not may_start(job)):
                return
