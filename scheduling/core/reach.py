"""Reach: the most GPUs a queue can ever hold of a flavor, and whether waiting alone can ever admit a job.

The one rule behind the explainer's `never_fits` and the simulator's rejection at arrival (the live API refuses such a
job at submission, from the flavor's largest node and total GPUs, without loading the fleet)."""

from __future__ import annotations

from typing import Iterable

from scheduling.core.model import Job, Node, Queue
from scheduling.core.placement import FleetState
from scheduling.core.quota import cohort_of, lendable


def cohort_pool(queues: Iterable[Queue], queue: Queue, flavor: str) -> int:
    """The GPUs of `flavor` that `queue`'s cohort can lend: its members' lendable parts (QuotaLedger.pool_size)."""
    cohort = cohort_of(queue)
    return sum(lendable(q.quotas[flavor]) for q in queues if cohort_of(q) == cohort and flavor in q.quotas)


def quota_reach(queue: Queue, flavor: str, *, pool: int, may_borrow: bool = True) -> int | None:
    """The most GPUs of `flavor` the queue can ever hold: its nominal quota, plus what its cohort's `pool` can lend
    beyond its own lendable part (capped by its borrowing limit) when it `may_borrow`. None: no quota for `flavor`."""
    quota = queue.quotas.get(flavor)
    if quota is None:
        return None
    if queue.cohort is None or not may_borrow:
        return quota.nominal
    reachable = quota.nominal - lendable(quota) + pool
    return reachable if quota.borrowing_limit is None else min(reachable, quota.nominal + quota.borrowing_limit)


class EmptyFleet:
    """Whether a gang fits `nodes` with nothing running on them, once per shape."""

    def __init__(self, nodes: tuple[Node, ...], topology: tuple[str, ...], *, topology_aware: bool) -> None:
        self.nodes, self.topology, self.topology_aware = nodes, topology, topology_aware
        self._fleet: FleetState | None = None
        self._fits: dict[tuple, bool] = {}

    def fits(self, job: Job) -> bool:
        fits = self._fits.get(job.shape)
        if fits is None:
            if self._fleet is None:
                self._fleet = FleetState(self.nodes, self.topology, topology_aware=self.topology_aware)
            fits = self._fits[job.shape] = self._fleet.fits(job)
        return fits


def why_never_admitted(job: Job, queue: Queue, *, pool: int, empty_fleet: EmptyFleet) -> str:
    """Why waiting alone will never admit `job` into `queue` (more than its quota can ever reach, or a gang the empty
    fleet cannot hold), or "" when it may. A non-preemptible job never borrows, so its reach is its nominal quota."""
    reach = quota_reach(queue, job.flavor, pool=pool, may_borrow=job.is_preemptible)
    if reach is None:
        return f"queue {job.queue} has no quota for {job.flavor}"
    if job.gpus > reach:
        return f"needs {job.gpus} GPUs; queue {job.queue} can reach at most {reach}"
    if not empty_fleet.fits(job):
        return f"needs {job.pods} pods of {job.flavor}; does not fit the empty fleet"
    return ""
