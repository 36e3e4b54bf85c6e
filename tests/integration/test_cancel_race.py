"""A stop is final: submit-then-cancel pairs racing a live reconcile pass loop on PostgreSQL never end admitted."""

from __future__ import annotations

import random
import time

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import Job, JobEvent, Placement
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, job_cancel, job_submit
from tests.conftest import H100
from tests.integration.pass_loop import live_pass_loop

pytestmark = pytest.mark.integration
PAIRS = 150


def test_no_cancelled_job_is_admitted_when_cancels_race_a_live_pass_loop(transactional_db, org):
    from django.db import connection

    assert connection.vendor == "postgresql", "the race only shows on PostgreSQL (SQLite serialises transactions)"
    rng = random.Random(11)
    with live_pass_loop() as passes:
        for i in range(PAIRS):
            job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"pair-{i}",
                             pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}], runtime_limit_s=36000)
            time.sleep(rng.uniform(0, 0.03))
            try:
                job_cancel(user=org["vision-researcher"], job_id=job.pk)
            except Exception:  # noqa: BLE001 - a job the pass finished first cannot be cancelled; counted below
                pass
    lost_races = [race for result in passes for race in result.lost_races]
    reconcile_pass_run(cluster=SimulatedCluster())  # one quiet pass applies the last decisions

    cancelled_then_admitted = []
    for job in Job.objects.filter(events__reason="cancelled").distinct():
        reasons = list(JobEvent.objects.filter(job=job).order_by("created_at", "id").values_list("reason", flat=True))
        if job.state != "cancelled" or "admitted" in reasons[reasons.index("cancelled"):]:
            cancelled_then_admitted.append((job.pk, job.state, reasons))
    cancelled = Job.objects.filter(state="cancelled")
    print(f"\n{PAIRS} pairs: {cancelled.count()} cancelled, {len(cancelled_then_admitted)} admitted after their cancel, "
          f"{len(lost_races)} lost races reported by the pass")
    assert cancelled_then_admitted == []
    assert not Placement.objects.filter(job__in=cancelled).exists()
    assert not cancelled.filter(applied_generation__gt=0).exists(), "every cancelled gang is suspended on the cluster"
    assert invariant_violations(cluster=SimulatedCluster()) == []
