"""Starvation reservations: who may hold back the later jobs of its queue (SchedulerConfig.starvation_after_s)."""

from __future__ import annotations

from scheduling.core.model import Job, Queue, Quota, SchedulerConfig
from scheduling.core.quota import QuotaLedger


def may_reserve(job: Job, quota: Quota, queue_usage: int) -> bool:
    """A starving job reserves when its queue's nominal quota could hold it and the queue borrows no more
    than the job's size: holding the queue back then drains its usage to where the job fits its nominal
    quota (and may reclaim it) within about one job's worth of ends. A queue living on borrowed capacity
    would be frozen for a long drain instead, so its jobs wait for the cohort as plain best effort does."""
    return job.gpus <= quota.nominal and queue_usage - quota.nominal <= job.gpus


def starving_before(now: float, config: SchedulerConfig) -> float:
    """Jobs submitted at or before this moment have waited past SchedulerConfig.starvation_after_s (-inf: off)."""
    threshold = config.starvation_after_s
    return float("-inf") if threshold is None else now - threshold


def is_starving(job: Job, queue: Queue, ledger: QuotaLedger, before: float) -> bool:
    """Waited past the starvation threshold (submitted at or before `before`), and may reserve (may_reserve): the job
    a blocked best-effort queue then holds back its later jobs for. The one rule of the cycle and the forecast."""
    if job.submitted_at > before:
        return False
    quota = queue.quotas.get(job.flavor)
    return quota is not None and may_reserve(job, quota, ledger.usage(job.queue, job.flavor))
