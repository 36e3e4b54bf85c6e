"""Fair sharing: which queue goes next, and how past usage fades.

Across queues the cycle serves the queue with the lowest key

    (head borrows without checkpoints, weighted dominant share, decayed historical usage / entitlement,
     head job's priority and submit time)

where, as in Kueue's fair sharing,

    dominant share = max over flavors f of  borrowed_f / pool_f,   divided by the queue's weight
    borrowed_f     = GPUs of f in use above the queue's nominal quota
    pool_f         = GPUs of f the queue's cohort can lend (the sum of its members' lendable parts)

so a queue within its quota (share 0) goes before any borrower, and among borrowers the lightest
goes first. Before all of it (`SchedulerConfig.uncheckpointed_borrowers_last`), while a job that checkpoints
waits in the cohort: a queue whose head job would borrow and does not checkpoint goes after every other. Lent
GPUs are the lender's to take back, and taking them from a job without checkpoints throws its whole run
away, so the value rule (core.payoff) seldom does: the cohort lends first to jobs that can give the GPUs back
cheaply, as Run:ai keeps over-quota capacity for preemptible work. Where no waiting job checkpoints there is
nobody to prefer, and the order is fair share alone: putting every borrower after every job within its
quota there (Kueue's entry order) lengthened cluster07's waits by 3-8 % on three traces (docs/simulation.md).
Ties, which are the rule when nobody borrows, are broken first by usage history: GPU-seconds used, decayed
with a half-life (Slurm's PriorityDecayHalfLife, default 7 days), divided by the queue's entitlement — its
weight × its nominal GPUs, as Slurm normalises usage by shares — so a team that held the fleet last week
waits behind one that did not, and a big team is not ranked behind a small one merely for using the quota it
owns; then by the queues' head jobs (higher priority, then less attained service, then earlier submission),
so equal queues interleave FIFO. Within a queue: higher priority first, then the lower attained-service
level (core.attained; a job preempted after a long run goes behind the fresh ones), then earlier submission,
then the lower job id.
"""

from __future__ import annotations

import math
import operator

from scheduling.core.attained import NO_SERVICE_ORDER, ServiceOrder
from scheduling.core.model import Job, Queue
from scheduling.core.quota import QuotaLedger, cohort_of


def decay_usage(usage_gpu_s: float, gpus_in_use: int, elapsed_s: float, half_life_s: float) -> float:
    """Usage after `elapsed_s` more seconds with `gpus_in_use` GPUs held throughout.

    The integral of a constant load under exponential decay, so splitting an interval in two
    gives the same result as one step: old usage fades by 2^(-t/h); the new GPU-seconds are
    added already partly faded.
    """
    if elapsed_s <= 0:
        return usage_gpu_s
    if half_life_s <= 0:
        return float(gpus_in_use * elapsed_s)
    rate = math.log(2) / half_life_s
    factor = math.exp(-rate * elapsed_s)
    return usage_gpu_s * factor + gpus_in_use * (1 - factor) / rate


def dominant_share(queue: Queue, ledger: QuotaLedger) -> float:
    share = 0.0
    cohort = cohort_of(queue)
    for flavor in queue.quotas:
        borrowed = ledger.borrowed(queue, flavor)
        pool = ledger.pool_size.get((cohort, flavor), 0)
        if borrowed and pool:
            share = max(share, borrowed / pool)
    return share / max(queue.weight, 1e-9)


def entitlement(queue: Queue) -> float:
    """What the queue's history is measured against: weight × nominal GPUs (at least one GPU, so a
    queue that only borrows still ranks by what it used)."""
    nominal = sum(quota.nominal for quota in queue.quotas.values())
    return max(queue.weight, 1e-9) * max(nominal, 1)


def queue_order_key(
    queue: Queue, ledger: QuotaLedger, historical_usage: float, head: Job, service: ServiceOrder = NO_SERVICE_ORDER,
    *, last: bool = False,
) -> tuple:
    """Lowest first: share, then faded history per entitlement, then the head job's priority, service level and age
    (`last`: after every queue that is not)."""
    return order_key(dominant_share(queue, ledger), historical_usage / entitlement(queue), queue.name, head, service,
                     last=last)


def borrows_without_checkpoints(job: Job, ledger: QuotaLedger) -> bool:
    """Admitting the job would borrow, and taking the GPUs back would lose its whole run."""
    return not job.checkpoint_interval_s and ledger.would_borrow(job)


def order_key(share: float, weighted_history: float, queue_name: str, head: Job,
              service: ServiceOrder = NO_SERVICE_ORDER, *, last: bool = False) -> tuple:
    """The order across queues, whoever holds the account (a queue, or a team: core.accounts); equal accounts go
    by their head jobs, as job_order_key orders jobs (the queue's name last, where the id would be). `last`: after
    every queue that is not."""
    return (last, share, weighted_history, -head.priority, service.pending_level(head), head.submitted_at, queue_name)


def job_order_key(job: Job, service: ServiceOrder = NO_SERVICE_ORDER) -> tuple:
    """A pending job's place in its queue, lowest first: higher priority, then the lower service level (core.attained:
    earlier runs' service, unless the job has waited long enough to go back to the first level), then earlier
    submission, then the lower id. The one definition of a queue's order: sort_queue sorts by it, and without levels
    it is Job.queue_order, the order the job_pending_order index keeps."""
    return (-job.priority, service.pending_level(job), job.submitted_at, job.id)


_by_age = operator.attrgetter("submitted_at", "id")
_by_priority = operator.attrgetter("priority")


def sort_queue(jobs: list[Job], service: ServiceOrder = NO_SERVICE_ORDER) -> None:
    """In place, by job_order_key: its parts from the least significant up, each a stable sort (tests/core/
    test_job_order.py holds the two to one order). This sorts every pending job each cycle, and a C-level key sorts
    faster than a Python key per job; only jobs that ran before have a service level above 0, so the level sort runs
    only when one did."""
    jobs.sort(key=_by_age)
    if service.levels_gpu_h and any(job.attained_gpu_s for job in jobs):
        jobs.sort(key=service.pending_level)
    jobs.sort(key=_by_priority, reverse=True)
