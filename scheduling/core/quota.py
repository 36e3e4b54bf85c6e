"""Quota and cohort arithmetic: who may use how many GPUs of a flavor, borrowing and lending included.

Kueue's semantics, per flavor:

- A queue owns `nominal` GPUs. `lending_limit` L (null = nominal) is how much of it the cohort may
  borrow; the rest, `guaranteed = nominal - L`, is the owner's alone, always.
- The cohort's pool is the sum of every member's lendable part. A member's GPUs in use above its
  guaranteed part are drawn from the pool, whether they are within its nominal quota or borrowed.
- A job fits its queue when, after admitting it,
      used <= nominal + borrowing_limit         (borrowing_limit null = no limit but the pool), and
      pool draws of the cohort <= pool size.
  It is *borrowing* when used exceeds nominal afterwards.
- A queue with no cohort is a cohort of one: it can never use more than its nominal quota.
- A non-preemptible job never borrows: it runs only within its queue's nominal quota. Borrowed GPUs are
  then always reclaimable by their owners, so no researcher can lock another team's lent quota.
- A queue with no quota entry for a flavor cannot run that flavor at all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Mapping

from scheduling.core.model import Job, Queue, Quota

UNLIMITED = 1 << 62


class QuotaLimit(enum.StrEnum):
    """Which limit blocks a job (the machine-readable half of a quota reason)."""

    NO_QUOTA = "no_quota"
    NOMINAL = "nominal"
    BORROWING_LIMIT = "borrowing_limit"
    COHORT_EXHAUSTED = "cohort_exhausted"
    LENT_OUT = "lent_out"
    """Within nominal quota, but other queues borrowed it: reclaimable by preemption."""
    NOT_PREEMPTIBLE = "not_preemptible"
    """Beyond nominal quota, and the job is non-preemptible: it may not borrow."""


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    fits: bool
    is_borrowing: bool
    flavor: str
    requested: int
    nominal: int
    used: int
    borrowing_limit: int | None
    cohort_can_lend: int
    """GPUs the cohort could still lend this queue beyond its own nominal quota."""
    room: int
    """GPUs the queue could still take now."""
    limit: QuotaLimit | str = ""
    """The QuotaLimit that blocks; "" when the job fits."""

    @property
    def short_by(self) -> int:
        return max(0, self.requested - self.room)

    def message(self, queue: str) -> str:
        if self.limit == QuotaLimit.NO_QUOTA:
            return f"queue {queue} has no quota for {self.flavor}"
        ceiling = "no borrowing limit" if self.borrowing_limit is None else f"borrowing limit {self.borrowing_limit}"
        why = {
            QuotaLimit.NOMINAL: "nominal quota",
            QuotaLimit.BORROWING_LIMIT: "borrowing limit",
            QuotaLimit.COHORT_EXHAUSTED: "the cohort has nothing more to lend",
            QuotaLimit.LENT_OUT: "its nominal quota is lent to other queues",
            QuotaLimit.NOT_PREEMPTIBLE: "a non-preemptible job never borrows: it runs within nominal quota only",
        }.get(self.limit, self.limit)
        return (
            f"needs {self.requested} {self.flavor} GPUs; queue {queue} has nominal {self.nominal}, "
            f"{self.used} in use, {ceiling}, cohort can lend {self.cohort_can_lend} "
            f"→ {self.short_by} short ({why})"
        )


class QuotaLedger:
    """GPUs in use per queue and flavor, and per cohort pool; mutated as the cycle admits and evicts."""

    def __init__(self, queues: Mapping[str, Queue], holding: Iterable[Job] = ()) -> None:
        self.queues = queues
        self.used: dict[tuple[str, str], int] = {}
        self.pool_size: dict[tuple[str, str], int] = {}
        self.pool_drawn: dict[tuple[str, str], int] = {}
        self.pool_of: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
        """(queue, flavor) → its cohort's pool and its guaranteed part (usage above it draws from the pool)."""
        for name, queue in queues.items():
            for flavor, quota in queue.quotas.items():
                key = (cohort_of(queue), flavor)
                self.pool_size[key] = self.pool_size.get(key, 0) + lendable(quota)
                self.pool_of[(name, flavor)] = (key, guaranteed(quota))
        for job in holding:
            self.add(job)

    def copy(self) -> "QuotaLedger":
        new = object.__new__(QuotaLedger)
        new.__dict__.update(self.__dict__)
        new.used, new.pool_drawn = dict(self.used), dict(self.pool_drawn)
        return new

    # --- queries -------------------------------------------------------------------------

    def usage(self, queue: str, flavor: str) -> int:
        return self.used.get((queue, flavor), 0)

    def pool_free(self, cohort: str, flavor: str) -> int:
        key = (cohort, flavor)
        return self.pool_size.get(key, 0) - self.pool_drawn.get(key, 0)

    def borrowed(self, queue: Queue, flavor: str) -> int:
        quota = queue.quotas.get(flavor)
        return max(0, self.usage(queue.name, flavor) - (quota.nominal if quota else 0))

    def check(self, job: Job) -> QuotaCheck:
        queue = self.queues.get(job.queue)
        quota = queue.quotas.get(job.flavor) if queue else None
        if quota is None:
            return QuotaCheck(False, False, job.flavor, job.gpus, 0, 0, 0, 0, 0, QuotaLimit.NO_QUOTA)
        used = self.usage(job.queue, job.flavor)
        after = used + job.gpus
        has_cohort = queue.cohort is not None
        may_borrow = has_cohort and job.is_preemptible
        ceiling = _ceiling(quota, may_borrow)
        pool_free = self.pool_free(cohort_of(queue), job.flavor)
        reachable = max(0, guaranteed(quota) - used) + pool_free
        room = max(0, min(ceiling - used, reachable))
        if self.fits(job):
            limit = ""
        elif after > ceiling:
            limit = QuotaLimit.BORROWING_LIMIT if may_borrow else QuotaLimit.NOT_PREEMPTIBLE if has_cohort else QuotaLimit.NOMINAL
        else:  # within the ceiling: the cohort's pool cannot give what the job would draw from it
            limit = (QuotaLimit.NOMINAL if not has_cohort else QuotaLimit.LENT_OUT if after <= quota.nominal
                     else QuotaLimit.COHORT_EXHAUSTED)
        return QuotaCheck(
            fits=not limit,
            is_borrowing=after > quota.nominal,
            flavor=job.flavor,
            requested=job.gpus,
            nominal=quota.nominal,
            used=used,
            borrowing_limit=quota.borrowing_limit if may_borrow else 0,
            cohort_can_lend=max(0, reachable - max(0, quota.nominal - used)) if may_borrow else 0,
            room=room,
            limit=limit,
        )

    def would_borrow(self, job: Job) -> bool:
        """Admitting the job would take its queue above its nominal quota of the job's flavor."""
        queue = self.queues.get(job.queue)
        quota = queue.quotas.get(job.flavor) if queue else None
        return quota is not None and self.usage(job.queue, job.flavor) + job.gpus > quota.nominal

    def fits(self, job: Job) -> bool:
        """`check(job).fits` without the figures a message needs: the preemption planner asks it after every victim
        it takes."""
        queue = self.queues.get(job.queue)
        quota = queue.quotas.get(job.flavor) if queue else None
        if quota is None:
            return False
        used = self.usage(job.queue, job.flavor)
        after = used + job.gpus
        return (after <= _ceiling(quota, queue.cohort is not None and job.is_preemptible)
                and _draw(quota, after) - _draw(quota, used) <= self.pool_free(cohort_of(queue), job.flavor))

    # --- mutation ------------------------------------------------------------------------

    def add(self, job: Job) -> None:
        self.shift(job, +job.gpus)

    def remove(self, job: Job) -> None:
        self.shift(job, -job.gpus)

    def shift(self, job: Job, delta: int) -> None:
        """Add `delta` GPUs (negative: remove) to the usage of `job`'s queue and flavor: a victim the planner takes
        or puts back, or many jobs of one queue at once."""
        # The hot path of preemption planning: the pool and guaranteed part are looked up once, at construction.
        key = (job.queue, job.flavor)
        before = self.used.get(key, 0)
        after = self.used[key] = before + delta
        pool_of = self.pool_of.get(key)
        if pool_of is not None:
            pool, floor = pool_of
            self.pool_drawn[pool] = self.pool_drawn.get(pool, 0) + max(0, after - floor) - max(0, before - floor)


def cohort_of(queue: Queue) -> str:
    return queue.cohort if queue.cohort is not None else f"queue:{queue.name}"


def lendable(quota: Quota) -> int:
    return quota.nominal if quota.lending_limit is None else min(quota.lending_limit, quota.nominal)


def guaranteed(quota: Quota) -> int:
    return quota.nominal - lendable(quota)


def _ceiling(quota: Quota, may_borrow: bool) -> int:
    """The most GPUs the queue may use for a job: its nominal quota, plus its borrowing limit if the job may borrow."""
    if not may_borrow:
        return quota.nominal
    return UNLIMITED if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit


def _draw(quota: Quota, used: int) -> int:
    """GPUs a queue takes from its cohort's pool when it uses `used`: all above its guaranteed part."""
    return max(0, used - guaranteed(quota))
