"""Celery tasks: thin wrappers around services (reconcile, usage collection), and the singleton lock of the reconcile pass."""

from __future__ import annotations

import contextlib

from celery import shared_task
from django.conf import settings

from scheduling.cluster.base import ClusterError
from scheduling.services.cluster import workload_create
from scheduling.services.explanations import estimates_refresh
from scheduling.services.reconcile import admission_cycle_run
from scheduling.services.usage import usage_collect
from scheduling.usage import UsageError

LOCK_KEY = "gangway:reconcile:lock"


@contextlib.contextmanager
def reconcile_lock(key: str = LOCK_KEY):
    """Yield True when this process holds the pass. On Redis: a lock taken without blocking; on the
    embedded broker the database row lock inside the pass serialises concurrent runs."""
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        yield True
        return
    import redis

    client = redis.Redis.from_url(broker)
    lock = client.lock(key, timeout=settings.GANGWAY_RECONCILE_LOCK_TIMEOUT_S, blocking=False)
    acquired = lock.acquire(blocking=False)
    try:
        yield acquired
    finally:
        if acquired:
            with contextlib.suppress(Exception):
                lock.release()


@shared_task(name="scheduling.tasks.reconcile", ignore_result=True)
def reconcile(after_write: bool = False) -> dict:
    """One pass. After a person's change (a submission, a cancel, a quota edit) or a pass that moved jobs, the
    start estimates are recomputed at once rather than at the next GANGWAY_ESTIMATE_INTERVAL_S."""
    with reconcile_lock() as acquired:
        if not acquired:
            return {"skipped": True}
        result = admission_cycle_run()
    if after_write or result.admitted or result.finished or result.preempted or result.evicted:
        refresh_estimates.delay()
    return {"skipped": False, "admitted": result.admitted, "finished": result.finished, "preempted": result.preempted, "evicted": result.evicted}


@shared_task(name="scheduling.tasks.collect_usage", ignore_result=True, autoretry_for=(UsageError,), retry_backoff=5,
             retry_backoff_max=60, max_retries=3)
def collect_usage() -> dict:
    """One round of GPU use samples; Prometheus errors retry with backoff, then the next minute's round tries again."""
    result = usage_collect()
    return {"samples": result.samples, "attributed": result.attributed, "pruned": result.pruned}


@shared_task(name="scheduling.tasks.create_workload", ignore_result=True, autoretry_for=(ClusterError,), retry_backoff=5,
             retry_backoff_max=300, max_retries=5)
def create_workload(job_id: int) -> dict:
    """The suspended, gated cluster Job of a job submitted with a pod template, created by a worker: the web holds
    no cluster credentials. Idempotent; should every retry fail, the reconcile pass creates it before release."""
    ref = workload_create(job_id=job_id)
    return {"namespace": ref.namespace, "name": ref.name}


ESTIMATE_LOCK_KEY = "gangway:estimates:lock"


@shared_task(name="scheduling.tasks.refresh_estimates", ignore_result=True)
def refresh_estimates() -> dict:
    """Every few minutes (GANGWAY_ESTIMATE_INTERVAL_S): the core run forward for each pending job's estimated start."""
    with reconcile_lock(key=ESTIMATE_LOCK_KEY) as acquired:
        if not acquired:
            return {"skipped": True}
        return {"skipped": False, **estimates_refresh()}
