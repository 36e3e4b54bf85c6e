"""Celery tasks: thin wrappers around services (reconcile, usage collection), and the singleton lock of the reconcile pass.

Services enqueue these tasks, so a task imports its service inside itself (HackSoft's rule): the module imports no
service at load time and services import it freely; an import-linter contract keeps it so."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time

from celery import shared_task
from django.conf import settings

from scheduling.cluster.base import ClusterError
from scheduling.usage import UsageError

LOCK_KEY = "gangway:reconcile:lock"
REQUEST_KEY = "gangway:reconcile:requested"
SKIPPED_WRITE_RETRY_S = 1.0
"""A pass asked for by a write that finds another pass running tries again this much later."""
logger = logging.getLogger("scheduling.tasks")


@functools.cache
def _redis(url: str):
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)


def _broker_redis():
    """A client of the broker's Redis, or None on another broker."""
    broker = settings.CELERY_BROKER_URL
    return _redis(broker) if broker.startswith(("redis://", "rediss://")) else None


def _request_once(key: str, task, countdown_s: float = 0.0, **kwargs) -> None:
    """Enqueue `task` to start in `countdown_s`, unless (on Redis) a request for it is queued and has not started yet:
    that one will see whatever changed before it starts, so a burst of writes queues one task, not one each. The
    marker `key` is cleared when the task starts (_request_started) and lapses GANGWAY_RECONCILE_INTERVAL_S after the
    task was due, should it be lost (the periodic tasks run meanwhile)."""
    client = _broker_redis()
    lapse_s = max(1, round(countdown_s + settings.GANGWAY_RECONCILE_INTERVAL_S))
    if client is not None and not client.set(key, 1, nx=True, ex=lapse_s):
        return
    if countdown_s > 0:
        task.apply_async(kwargs=kwargs, countdown=countdown_s)
    else:
        task.delay(**kwargs)


def _request_started(key: str) -> None:
    """First thing in a requested task, before it reads anything: a change committed from now on asks again."""
    if (client := _broker_redis()) is not None:
        client.delete(key)


def reconcile_request() -> None:
    """Ask for a pass that starts after this moment (a write has just committed)."""
    _request_once(REQUEST_KEY, reconcile, after_write=True)


@contextlib.contextmanager
def reconcile_lock(key: str = LOCK_KEY):
    """Yield True when this process holds the pass. On Redis: a lease taken without blocking, renewed by a
    heartbeat while the pass runs, so a holder that dies (SIGKILL) frees it within GANGWAY_RECONCILE_LOCK_LEASE_S;
    on the embedded broker the database row lock inside the pass serialises concurrent runs."""
    client = _broker_redis()
    if client is None:
        yield True
        return
    lease_s = settings.GANGWAY_RECONCILE_LOCK_LEASE_S
    lock = client.lock(key, timeout=lease_s, blocking=False, thread_local=False)  # the heartbeat thread renews it
    acquired = lock.acquire(blocking=False)
    if not acquired:
        yield False
        return
    done = threading.Event()
    heartbeat = threading.Thread(target=_renew, args=(lock, lease_s, done), name=f"lease {key}", daemon=True)
    heartbeat.start()
    try:
        yield True
    finally:
        done.set()
        heartbeat.join()
        with contextlib.suppress(Exception):
            lock.release()


def _renew(lock, lease_s: float, done: threading.Event) -> None:
    """Extend the lease to a full `lease_s` every third of it until the pass is done."""
    while not done.wait(lease_s / 3):
        try:
            lock.reacquire()
        except Exception:  # noqa: BLE001 - lost (expired or Redis down): the database row lock still serialises passes
            logger.warning("reconcile lock %s: renewing the lease failed", lock.name, exc_info=True)


@shared_task(name="scheduling.tasks.reconcile", ignore_result=True, bind=True)
def reconcile(self, after_write: bool = False) -> dict:
    """One pass. After a person's change (a submission, a cancel, a quota edit) or a pass that moved jobs, the
    start estimates are recomputed at once rather than at the next GANGWAY_ESTIMATE_INTERVAL_S."""
    from scheduling.services.reconcile import reconcile_pass_run

    if after_write:
        _request_started(REQUEST_KEY)
    with reconcile_lock() as acquired:
        if not acquired:
            if after_write and not self.request.is_eager:
                # The pass holding the lock may have read the state before the write committed: ask again after it,
                # or the write would wait for the next beat.
                _request_once(REQUEST_KEY, reconcile, countdown_s=SKIPPED_WRITE_RETRY_S, after_write=True)
            return {"skipped": True}
        result = reconcile_pass_run()
    if after_write or result.admitted or result.finished or result.preempted or result.evicted:
        estimates_request()
    return {"skipped": False, "admitted": result.admitted, "finished": result.finished, "preempted": result.preempted, "evicted": result.evicted}


@shared_task(name="scheduling.tasks.collect_usage", ignore_result=True, autoretry_for=(UsageError,), retry_backoff=5,
             retry_backoff_max=60, max_retries=3)
def collect_usage() -> dict:
    """One round of GPU use samples; Prometheus errors retry with backoff, then the next minute's round tries again."""
    from scheduling.services.usage import usage_collect

    result = usage_collect()
    return {"samples": result.samples, "attributed": result.attributed, "pruned": result.pruned}


@shared_task(name="scheduling.tasks.create_workload", ignore_result=True, autoretry_for=(ClusterError,), retry_backoff=5,
             retry_backoff_max=300, max_retries=5)
def create_workload(job_id: int) -> dict:
    """The suspended, gated cluster Job of a job submitted with a pod template, created by a worker: the web holds
    no cluster credentials. Idempotent; should every retry fail, the reconcile pass creates it before release."""
    from scheduling.services.cluster import workload_create

    ref = workload_create(job_id=job_id)
    return {"namespace": ref.namespace, "name": ref.name}


ESTIMATE_LOCK_KEY = "gangway:estimates:lock"
ESTIMATE_REQUEST_KEY = "gangway:estimates:requested"
ESTIMATE_STARTED_KEY = "gangway:estimates:started"


def estimates_request() -> None:
    """Ask for the start estimates to be recomputed, at once unless a refresh started less than
    GANGWAY_ESTIMATE_MIN_GAP_S ago: then when the gap is over. A refresh runs the core forward over the whole queue
    (1.5 s of CPU at 4,000 pending, about five passes' worth); under a stream of submissions the passes asked for one
    back to back and took a core from the web (`bench submit-load`)."""
    client = _broker_redis()
    countdown_s = 0.0
    if client is not None and (started := client.get(ESTIMATE_STARTED_KEY)) is not None:
        countdown_s = max(0.0, float(started) + settings.GANGWAY_ESTIMATE_MIN_GAP_S - time.time())
    _request_once(ESTIMATE_REQUEST_KEY, refresh_estimates, countdown_s=countdown_s)


@shared_task(name="scheduling.tasks.refresh_estimates", ignore_result=True)
def refresh_estimates() -> dict:
    """Every few minutes (GANGWAY_ESTIMATE_INTERVAL_S), and after passes that moved the queue: the core run forward
    for each pending job's estimated start."""
    from scheduling.services.explanations import estimates_refresh

    _request_started(ESTIMATE_REQUEST_KEY)
    with reconcile_lock(key=ESTIMATE_LOCK_KEY) as acquired:
        if not acquired:
            return {"skipped": True}
        if (client := _broker_redis()) is not None:
            client.set(ESTIMATE_STARTED_KEY, time.time(), ex=max(1, round(settings.GANGWAY_ESTIMATE_MIN_GAP_S)))
        return {"skipped": False, **estimates_refresh()}
