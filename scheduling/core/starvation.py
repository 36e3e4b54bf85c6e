"""Starvation reservations: who may hold back the later jobs of its queue (SchedulerConfig.starvation_after_s)."""

from __future__ import annotations

from scheduling.core.model import Job, Quota


def may_reserve(job: Job, quota: Quota, queue_usage: int) -> bool:
    """A starving job reserves when its queue's nominal quota could hold it and the queue borrows no more
    than the job's size: holding the queue back then drains its usage to where the job fits its nominal
    quota (and may reclaim it) within about one job's worth of ends. A queue living on borrowed capacity
    would be frozen for a long drain instead, so its jobs wait for the cohort as plain best effort does."""
    return job.gpus <= quota.nominal and queue_usage - quota.nominal <= job.gpus
