"""Races on PostgreSQL: two `reconcile --once` at once, and the user actions that meet a pass (quota edits,
preemption approvals) against a live pass loop. (Cancels: test_cancel_race.py; creates of one name:
test_concurrent_writes.py.)"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter

import pytest
from django.db import connection

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import AuditAction, AuditRecord, Job, JobEvent, PlanStatus, PreemptionPlan, QueueQuota, SimulatedWorkload
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, job_cancel
from tests.conftest import H100
from tests.integration.pass_loop import live_pass_loop
from tests.integration.test_crash_and_concurrency import ROOT, database_url, submit
from tests.services.test_reconcile import submit as submit_as

pytestmark = pytest.mark.integration


def wait_until(condition, *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# --- two `reconcile --once` at once ----------------------------------------------------------------------
RECONCILE_AT = """
import time, django
django.setup()
from django.core.management import call_command
time.sleep(max(0.0, {start} - time.time()))
call_command("reconcile", "--once")
"""


def test_three_reconcile_once_started_together_admit_each_job_exactly_once(services_are_real, transactional_db, org):
    jobs = [submit(org, name=f"gang-{i}") for i in range(3)]
    start = time.time() + 8  # every process has set Django up by then, so their passes begin together
    processes = [
        subprocess.Popen([sys.executable, "-c", RECONCILE_AT.format(start=start)], cwd=ROOT, text=True,
                         env={**os.environ, "DATABASE_URL": database_url()}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]

    assert [p.returncode for p in processes] == [0, 0, 0], [err for _, err in outputs]
    admitted = [out for out, _ in outputs if out.startswith("admitted 3 job(s)")]
    others = [out for out, _ in outputs if not out.startswith("admitted 3 job(s)")]
    assert len(admitted) == 1, outputs
    assert all(out.startswith(("skipped: another reconcile pass holds the lock", "admitted nothing")) for out in others), outputs
    print(f"\nthree `reconcile --once` at once: 1 admitted 3 jobs, {sum('skipped' in o for o in others)} skipped on the lock, "
          f"{sum('admitted nothing' in o for o in others)} ran after it and admitted nothing")
    assert Counter(JobEvent.objects.filter(reason="admitted").values_list("job_id", flat=True)) == {j.pk: 1 for j in jobs}
    assert list(SimulatedWorkload.objects.values_list("generation", "releases").distinct()) == [(1, 1)]
    assert invariant_violations(cluster=SimulatedCluster()) == []


# --- quota edits against a live pass loop ----------------------------------------------------------------
EDITS = 40


def test_quota_edits_racing_a_live_pass_loop_are_never_lost_and_never_let_a_queue_over_its_quota(transactional_db, org, client_as):
    """Vision cannot borrow (language lends nothing), so what it holds is bounded by its own nominal quota, which a
    lead moves between 16 and 32 GPUs while whole-node jobs arrive and a pass loop admits them."""
    assert connection.vendor == "postgresql"
    QueueQuota.objects.filter(queue__name="language-main").update(lending_limit=0)
    lead = client_as("vision-lead")
    rng = random.Random(7)
    nominals = []
    with live_pass_loop() as passes:
        for i in range(EDITS):
            submit(org, count=1, name=f"job-{i}")
            nominal = 32 if i % 2 else 16
            response = lead.patch("/api/v1/queues/vision-main/", {"quotas": {H100: {"nominal": nominal}}}, format="json")
            assert response.status_code == 200, response.json()
            assert QueueQuota.objects.get(queue__name="vision-main").nominal == nominal, "a pass never writes quotas back"
            nominals.append(nominal)
            held = sum(Job.objects.filter(queue__name="vision-main", state__in=["admitted", "running"]).values_list("gpus", flat=True))
            assert held <= 32, f"vision holds {held} GPUs; its nominal never went above 32"
            time.sleep(rng.uniform(0, 0.03))
    reconcile_pass_run(cluster=SimulatedCluster())

    assert QueueQuota.objects.get(queue__name="vision-main").nominal == nominals[-1] == 32
    assert AuditRecord.objects.filter(action=AuditAction.QUOTA_UPDATE, target_id="vision-main").count() == EDITS
    held = sum(Job.objects.filter(queue__name="vision-main", state__in=["admitted", "running"]).values_list("gpus", flat=True))
    print(f"\n{EDITS} quota edits against {len(passes)} passes: every edit kept, vision holds {held} of 32 GPUs")
    assert held == 32, "the last nominal (32) is filled once the edits stop"
    assert invariant_violations(cluster=SimulatedCluster()) == []


# --- preemption approvals against a live pass loop -------------------------------------------------------
ROUNDS = 6


@pytest.mark.usefixtures("every_plan_runs")
def test_approvals_racing_a_live_pass_loop_preempt_only_after_approval_and_admit_the_reclaimer(transactional_db, org, client_as):
    """Each round: language borrows the whole fleet, vision reclaims its nominal quota with a cross-team plan, and an
    admin approves the plan at a random moment of the loop's passes."""
    assert connection.vendor == "postgresql"
    admin = client_as("admin")
    rng = random.Random(5)
    decided = []
    with live_pass_loop() as passes:
        for round_ in range(ROUNDS):
            now = time.time()
            borrower = submit_as(org, user="language-researcher", queue="language-main", count=8, gpus=8, limit_s=36000,
                                 at=now, name=f"borrower-{round_}")
            wait_until(lambda: Job.objects.get(pk=borrower.pk).state in ("admitted", "running"), timeout_s=30,
                       what="the borrower's admission")
            reclaimer = submit_as(org, count=2, gpus=8, limit_s=36000, at=time.time(), name=f"reclaimer-{round_}")
            wait_until(lambda: PreemptionPlan.objects.filter(job=reclaimer, status=PlanStatus.PROPOSED).exists(), timeout_s=30,
                       what="the cross-team plan")
            plan = PreemptionPlan.objects.get(job=reclaimer, status=PlanStatus.PROPOSED)
            assert not Job.objects.filter(pk=borrower.pk, state="pending").exists(), "no victim moves before approval"
            time.sleep(rng.uniform(0, 0.1))
            response = admin.post(f"/api/v1/preemptions/{plan.pk}/approve/", {}, format="json")
            assert response.status_code in (200, 400), response.json()  # 400: superseded by a pass just before
            if response.status_code == 200:
                decided.append(plan.pk)
                wait_until(lambda: Job.objects.get(pk=reclaimer.pk).state in ("admitted", "running"), timeout_s=30,
                           what="the reclaimer's admission after approval")
            for job in (reclaimer, borrower):
                job_cancel(user=job.owner, job_id=job.pk)
            wait_until(lambda: not Job.objects.filter(state__in=["admitted", "running"]).exists(), timeout_s=30,
                       what="an empty fleet for the next round")
    reconcile_pass_run(cluster=SimulatedCluster())

    assert decided, "at least one approval landed on a proposed plan"
    for event in JobEvent.objects.filter(reason="preempted"):
        plan = PreemptionPlan.objects.get(victim_rows__job=event.job, decided_by__isnull=False, decided_at__lte=event.created_at)
        assert plan.pk in decided and f"plan #{plan.pk}" in event.message and "approved by admin" in event.message
    preempted = JobEvent.objects.filter(reason="preempted").count()
    print(f"\n{ROUNDS} approvals against {len(passes)} passes: {len(decided)} approved while proposed, "
          f"{preempted} victims preempted, each after its plan's approval")
    assert not PreemptionPlan.objects.filter(needs_approval=True, status=PlanStatus.EXECUTED, decided_by__isnull=True).exists()
    assert invariant_violations(cluster=SimulatedCluster()) == []
