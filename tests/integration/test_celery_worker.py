"""A job submitted through the API is admitted by a real Celery worker on Redis, against PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portal.celery import app as celery_app
from scheduling.livebench.server import database_url
from scheduling.models import Job
from scheduling.tasks import LOCK_KEY, reconcile
from tests.conftest import job_body

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(transactional_db, services_are_real, tmp_path):
    """A real `celery -A portal worker` process using the test database."""
    env = {**os.environ, "DATABASE_URL": database_url(), "GANGWAY_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    log = open(tmp_path / "worker.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--concurrency=1", "--loglevel=INFO",
         "-n", f"gangway-test-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    yield process
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.close()


def test_a_job_submitted_through_the_api_is_admitted_by_a_celery_worker(worker, client_as, settings, tmp_path):
    settings.GANGWAY_RECONCILE_ON_WRITE = True
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(), format="json")
        assert response.status_code == 201
        job_id = response.json()["id"]
        deadline = time.monotonic() + 90
        state = "pending"
        while time.monotonic() < deadline:
            state = Job.objects.get(pk=job_id).state
            if state in ("admitted", "running"):
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.5)
        assert state in ("admitted", "running"), (tmp_path / "worker.log").read_text()[-3000:]
        job = Job.objects.get(pk=job_id)
        assert job.placements.count() == 2 and job.applied_generation == job.admission_generation == 1
    finally:
        celery_app.conf.task_always_eager = eager


def test_a_second_pass_skips_while_another_holds_the_redis_lock(transactional_db, services_are_real, org):
    lock = services_are_real.lock(LOCK_KEY, timeout=30)
    assert lock.acquire(blocking=False)
    try:
        assert reconcile.apply().get() == {"skipped": True}
    finally:
        lock.release()
    assert reconcile.apply().get()["skipped"] is False


@pytest.mark.parametrize("after_write, asks_again", [
    pytest.param(True, True, id="a pass a write asked for that finds another running asks again after it"),
    pytest.param(False, False, id="a beat pass that finds another running just skips"),
])
def test_a_skipped_pass_asks_again_only_for_a_write(transactional_db, services_are_real, org, after_write, asks_again):
    from unittest import mock

    from scheduling.tasks import REQUEST_KEY, SKIPPED_WRITE_RETRY_S

    services_are_real.delete(REQUEST_KEY)
    lock = services_are_real.lock(LOCK_KEY, timeout=30)
    assert lock.acquire(blocking=False)
    try:
        with mock.patch.object(reconcile, "apply_async") as later:
            assert reconcile.run(after_write=after_write) == {"skipped": True}
        if asks_again:
            later.assert_called_once_with(kwargs={"after_write": True}, countdown=SKIPPED_WRITE_RETRY_S)
            assert services_are_real.exists(REQUEST_KEY)
        else:
            later.assert_not_called()
    finally:
        lock.release()
        services_are_real.delete(REQUEST_KEY)
