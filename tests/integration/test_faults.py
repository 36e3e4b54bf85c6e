"""Faults against real processes (gunicorn, Celery worker and beat): a worker killed mid-pass, Redis stopped for 30 s,
PostgreSQL restarted. The Redis and PostgreSQL that are stopped are private to the test, never the shared ones;
`check_invariants` runs after each, in a process of its own, as an operator would run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
import redis
import requests
from django.conf import settings
from django.db import connection

from portal.accounts.services import api_token_create
from scheduling.livebench import server
from scheduling.models import Job, ReconcileState
from scheduling.tasks import LOCK_KEY, reconcile
from tests.conftest import H100
from tests.integration.test_crash_and_concurrency import (  # noqa: F401 - fixtures
    ROOT, check_invariants_in_a_process, start_worker, submit, wait_for,
)

pytestmark = pytest.mark.integration
REDIS_OUTAGE_S = 30


def small_job(name: str) -> dict:
    return {"name": name, "queue": "vision-main", "flavor": H100, "pod_sets": [{"name": "worker", "count": 1, "gpus_per_pod": 1}],
            "runtime_limit_s": 36000}


class Api:
    """The API of a gunicorn this test started, as one user."""

    def __init__(self, port: int, token: str) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def submit(self, name: str) -> tuple[int, float, dict]:
        started = time.monotonic()
        response = self.session.post(f"{self.base}/jobs/", json=small_job(name), timeout=60)
        is_json = response.headers.get("Content-Type", "").startswith("application/json")
        return response.status_code, time.monotonic() - started, response.json() if is_json else {"text": response.text[:500]}

    def states(self) -> tuple[int, list[str]]:
        response = self.session.get(f"{self.base}/jobs/?limit=500", timeout=60)
        return response.status_code, [row["state"] for row in response.json()["results"]] if response.ok else []


# --- a worker killed mid-pass --------------------------------------------------------------------------------
def test_a_worker_killed_mid_pass_stalls_the_next_pass_for_one_lease_not_a_minute(start_worker, org):
    """The default lease (4 s) and a beat every 2 s: the next pass admits the waiting job well within 10 s."""
    job = submit(org, name="waits-for-the-next-pass", count=1)
    ReconcileState.objects.get_or_create(pk=1)
    lease = {"GANGWAY_RECONCILE_LOCK_LEASE_S": str(settings.GANGWAY_RECONCILE_LOCK_LEASE_S)}
    lock = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    db = connection.settings_dict
    # The test holds the pass's database row lock, so the doomed worker's pass stops mid-way: lease taken, waiting.
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]) as blocker:
        blocker.execute("SELECT id FROM scheduling_reconcilestate WHERE id = 1 FOR UPDATE")
        doomed = start_worker("doomed", **lease)
        reconcile.delay()
        wait_for(lambda: lock.exists(LOCK_KEY) and _waiting_on_a_lock(blocker) > 0, timeout_s=90,
                 what="the doomed worker to hold the lease and wait mid-pass", logs=[doomed.log_path])
        survivor = start_worker("survivor", **lease)
        wait_for(lambda: "ready" in survivor.log_path.read_text(), timeout_s=90, what="the surviving worker",
                 logs=[survivor.log_path])
        beat = start_worker("beat", role="beat", GANGWAY_RECONCILE_INTERVAL_S="2", **lease)

        os.killpg(doomed.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        blocker.rollback()  # the row lock goes with the worker's connection; only its Redis lease is left behind

    wait_for(lambda: Job.objects.get(pk=job.pk).state in ("admitted", "running"), timeout_s=30,
             what="the next pass after the kill", logs=[survivor.log_path, beat.log_path])
    stalled_s = time.monotonic() - killed_at
    print(f"\nworker SIGKILLed mid-pass: the next pass admitted the waiting job {stalled_s:.1f} s later "
          f"(lease {settings.GANGWAY_RECONCILE_LOCK_LEASE_S:g} s, beat every 2 s)")
    assert stalled_s <= 10
    assert doomed.wait(10) == -signal.SIGKILL
    checked = check_invariants_in_a_process()
    assert checked.returncode == 0, checked.stderr


def _waiting_on_a_lock(connection_) -> int:
    return connection_.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()[0]


# --- Redis stopped ---------------------------------------------------------------------------------------------
def test_submissions_while_redis_is_down_are_kept_and_admitted_once_it_is_back(start_worker, org, private_redis):
    """Redis carries the broker (passes asked for on each write, the periodic pass) and the web's rate-limit cache."""
    on_private_redis = {"CELERY_BROKER_URL": private_redis.url(0), "GANGWAY_CACHE_URL": private_redis.url(1)}
    worker = start_worker("worker", **on_private_redis)
    beat = start_worker("beat", role="beat", GANGWAY_RECONCILE_INTERVAL_S="2", **on_private_redis)
    port = server.free_port()
    web = server.gunicorn_start(port=port, workers=2, GANGWAY_RECONCILE_ON_WRITE="1", **on_private_redis)
    try:
        api = Api(port, api_token_create(user=org["vision-researcher"], name="faults", expires_in_days=1)[1])
        assert api.submit("before")[0] == 201
        wait_for(lambda: api.states()[1] == ["admitted"] or api.states()[1] == ["running"], timeout_s=60,
                 what="the pass loop to admit the first job", logs=[worker.log_path, beat.log_path])

        private_redis.stop()
        stopped_at = time.monotonic()
        during = []
        while time.monotonic() - stopped_at < REDIS_OUTAGE_S:
            during.append(api.submit(f"during-{len(during)}"))
            time.sleep(1)
        private_redis.start()
        back_at = time.monotonic()

        assert [status for status, _, _ in during] == [201] * len(during), [body for _, _, body in during]
        slowest_s = max(seconds for _, seconds, _ in during)
        ids = [body["id"] for _, _, body in during]
        assert Job.objects.filter(pk__in=ids).count() == len(ids), "every submission is stored"
        wait_for(lambda: not Job.objects.filter(pk__in=ids, state="pending").exists(), timeout_s=90,
                 what="the passes to resume and admit what was submitted during the outage",
                 logs=[worker.log_path, beat.log_path])
        resumed_s = time.monotonic() - back_at
    finally:
        server.stop(web)
    print(f"\nRedis down {REDIS_OUTAGE_S} s: {len(during)} submissions, all 201 (slowest {slowest_s:.2f} s), all stored; "
          f"admitted {resumed_s:.1f} s after Redis returned")
    assert Job.objects.filter(state="pending").count() == 0
    checked = check_invariants_in_a_process()
    assert checked.returncode == 0, checked.stderr


# --- PostgreSQL restarted --------------------------------------------------------------------------------------
SEED_SCRIPT = """
import django; django.setup()
from portal.accounts.services import api_token_create
from scheduling.models import Queue, QueueQuota, QueueUsage, Team, TeamAllotment, Role
from scheduling.services import fleet_sync
from tests.conftest import H100, make_user, small_fleet_spec
fleet_sync(fleet=small_fleet_spec())
team = Team.objects.create(name="vision")
TeamAllotment.objects.create(team=team, flavor_id=1, gpus=64)
queue = Queue.objects.create(name="vision-main", team=team)
QueueQuota.objects.create(queue=queue, flavor_id=1, nominal=64)
QueueUsage.objects.create(queue=queue)
print(api_token_create(user=make_user("vision-researcher", team=team), name="faults", expires_in_days=1)[1])
"""


def test_web_and_worker_recover_when_postgresql_restarts(start_worker, private_postgres, private_redis):
    private_postgres.create_database("gangway")
    on_private = {"DATABASE_URL": private_postgres.url("gangway"), "CELERY_BROKER_URL": private_redis.url(0)}
    env = {**os.environ, **on_private}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    token = subprocess.run([sys.executable, "-c", SEED_SCRIPT], cwd=ROOT, env=env, check=True, capture_output=True,
                           text=True, timeout=120).stdout.strip().splitlines()[-1]
    worker = start_worker("worker", **on_private)
    beat = start_worker("beat", role="beat", GANGWAY_RECONCILE_INTERVAL_S="2", **on_private)
    port = server.free_port()
    web = server.gunicorn_start(port=port, workers=2, threads=2, DATABASE_CONN_MAX_AGE="60", **on_private)  # as deployed
    try:
        api = Api(port, token)
        assert api.submit("before")[0] == 201
        wait_for(lambda: api.states()[1] in (["admitted"], ["running"]), timeout_s=60, what="the first admission",
                 logs=[worker.log_path, beat.log_path])

        private_postgres.stop()
        down = [api.submit("while-down")[0], api.states()[0]]
        time.sleep(3)  # a few failed passes
        private_postgres.start()

        status, _, body = api.submit("after")
        assert status == 201, body
        wait_for(lambda: api.states()[1].count("pending") == 0 and len(api.states()[1]) == 2, timeout_s=60,
                 what="the worker to admit a job submitted after the restart", logs=[worker.log_path, beat.log_path])
    finally:
        server.stop(web)
    print(f"\nPostgreSQL down: the API answered {down}; after the restart a submission was admitted")
    assert down == [503, 503], "while the database is down the API says so, with no traceback"
    assert worker.poll() is None and beat.poll() is None, "the worker and beat outlived the restart"
    checked = subprocess.run([sys.executable, "manage.py", "check_invariants"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
