"""Crash safety and concurrency of the reconcile pass against real PostgreSQL, Redis and Celery worker processes:
a worker killed between commit and apply is healed by the next one; two passes at once never both run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connections

from portal.celery import app as celery_app
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import Job, JobEvent, Placement, SimulatedWorkload
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, job_submit
from scheduling.livebench.server import database_url
from scheduling.tasks import reconcile
from tests.conftest import H100

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def start_worker(transactional_db, services_are_real, tmp_path):
    """Start real `celery -A portal worker` (or, with role="beat", `celery beat`) processes on the test database;
    stops the ones still alive."""
    processes = []

    def start(name: str, *, role: str = "worker", **extra_env: str) -> subprocess.Popen:
        env = {**os.environ, "DATABASE_URL": database_url(), "GANGWAY_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1",
               "GANGWAY_RECONCILE_LOCK_LEASE_S": "3", **extra_env}
        log = open(tmp_path / f"{name}.log", "w")
        options = (["--pool=solo", "--concurrency=1", "-n", f"gangway-{name}-{os.getpid()}@%h"] if role == "worker"
                   else ["--schedule", str(tmp_path / f"{name}-schedule")])
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", role, "--loglevel=INFO", *options],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        process.log_path = tmp_path / f"{name}.log"
        processes.append((process, log))
        return process

    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield start
    celery_app.conf.task_always_eager = eager
    for process, log in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def wait_for(condition, *, timeout_s: float, what: str, logs=(), nudge=None):
    deadline = time.monotonic() + timeout_s
    last_nudge = 0.0
    while time.monotonic() < deadline:
        if condition():
            return
        if nudge is not None and time.monotonic() - last_nudge > 3:
            nudge()
            last_nudge = time.monotonic()
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n" + "\n".join(Path(p).read_text()[-3000:] for p in logs))


def submit(org, *, count: int = 2, name: str = "gang") -> Job:
    return job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": count, "gpus_per_pod": 8}], runtime_limit_s=36000)


def check_invariants_in_a_process() -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check_invariants"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DATABASE_URL": database_url()},
    )


def test_a_worker_killed_between_commit_and_apply_is_healed_exactly_once_by_the_next_worker(start_worker, org):
    jobs = [submit(org, name="first"), submit(org, name="second", count=1)]

    # 1. A worker with the test hook dies right after its pass commits the admissions, before applying them.
    doomed = start_worker("doomed", GANGWAY_FAULT_AFTER_COMMIT="1")
    reconcile.delay()
    wait_for(lambda: doomed.poll() is not None, timeout_s=90, what="the faulty worker to die", logs=[doomed.log_path])
    assert doomed.returncode == 1
    assert "GANGWAY_FAULT_AFTER_COMMIT" in doomed.log_path.read_text()
    rows = {j.pk: (j.state, j.admission_generation, j.applied_generation) for j in Job.objects.all()}
    assert rows == {j.pk: ("admitted", 1, 0) for j in jobs}, "committed, not applied"
    assert not SimulatedWorkload.objects.exists(), "nothing reached the cluster"
    assert invariant_violations(cluster=SimulatedCluster()) == []

    # 2. A healthy worker's next pass applies what was committed, once.
    healer = start_worker("healer")
    wait_for(lambda: not Job.objects.filter(applied_generation=0).exists(), timeout_s=90, what="the healing pass",
             logs=[healer.log_path], nudge=reconcile.delay)
    for job in jobs:
        job.refresh_from_db()
        assert job.state in ("admitted", "running") and job.admission_generation == job.applied_generation == 1
        workload = SimulatedWorkload.objects.get(job=job)
        assert (workload.generation, workload.releases) == (1, 1), "released exactly once, for generation 1"
        assert JobEvent.objects.filter(job=job, reason="admitted").count() == 1
    assert Placement.objects.count() == 3

    # 3. More passes change nothing; the invariant checker, run as an operator would, is satisfied.
    reconcile.delay()
    reconcile.delay()
    time.sleep(3)
    assert list(SimulatedWorkload.objects.order_by("job_id").values_list("generation", "releases")) == [(1, 1), (1, 1)]
    assert JobEvent.objects.filter(reason="admitted").count() == 2
    checked = check_invariants_in_a_process()
    assert checked.returncode == 0, checked.stderr
    assert "all invariants hold" in checked.stdout


class SlowCluster(SimulatedCluster):
    """Reading the nodes takes a while, so two passes started together overlap unless a guard serialises them."""

    lists_node_rows = False  # list_nodes is this test's hook: the pass must call it every time

    def __init__(self):
        self.reads: list[tuple[float, float]] = []

    def list_nodes(self):
        started = time.monotonic()
        time.sleep(0.5)
        nodes = super().list_nodes()
        self.reads.append((started, time.monotonic()))
        return nodes


def run_together(target, count: int = 2) -> list:
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(i):
        try:
            barrier.wait()
            results[i] = target()
        except BaseException as error:  # noqa: BLE001 - surfaced below
            results[i] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def test_two_passes_started_at_once_are_serialised_by_the_database_and_equal_one_pass(transactional_db, services_are_real, org):
    jobs = [submit(org, name=f"gang-{i}") for i in range(3)]
    cluster = SlowCluster()

    results = run_together(lambda: reconcile_pass_run(cluster=cluster))

    (first_start, first_end), (second_start, _) = sorted(cluster.reads)
    assert second_start >= first_end, "the second pass read the cluster only after the first committed"
    admitted = sorted(job_id for result in results for job_id in result.admitted)
    assert admitted == sorted(j.pk for j in jobs), "every job admitted once, by one of the two passes"
    assert sorted(len(r.admitted) for r in results) == [0, 3]
    assert JobEvent.objects.filter(reason="admitted").count() == 3
    assert list(SimulatedWorkload.objects.values_list("generation", "releases").distinct()) == [(1, 1)]
    assert invariant_violations(cluster=SimulatedCluster()) == []


def test_two_reconcile_tasks_started_at_once_one_runs_and_one_skips(transactional_db, services_are_real, org, monkeypatch):
    jobs = [submit(org, name=f"gang-{i}") for i in range(2)]
    cluster = SlowCluster()
    monkeypatch.setattr("scheduling.cluster.registry.get_cluster", lambda: cluster)

    results = run_together(lambda: reconcile.apply().get())

    assert sorted(r["skipped"] for r in results) == [False, True]
    ran = next(r for r in results if not r["skipped"])
    assert sorted(ran["admitted"]) == sorted(j.pk for j in jobs)
    assert len(cluster.reads) == 1, "the skipped task never started a pass"
    assert invariant_violations(cluster=SimulatedCluster()) == []
