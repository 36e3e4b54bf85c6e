"""The history page: waits (p50/p95 per queue and day), admissions and preemptions, from job events, in charts and a table."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from scheduling.models import Job, JobEvent
from scheduling.selectors.history import _percentile, queue_history
from scheduling.services import reconcile_pass_run, job_submit
from tests.conftest import H100


def test_percentiles_are_nearest_rank():
    values = [60.0, 120.0, 180.0, 240.0, 600.0]
    assert (_percentile(values, 0.5), _percentile(values, 0.95), _percentile([5.0], 0.95)) == (180.0, 600.0, 5.0)


def test_waits_admissions_and_preemptions_per_queue_and_day(client, org):
    now = timezone.now()
    jobs = [job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"j{i}",
                       pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}], now=(now - dt.timedelta(minutes=m)).timestamp())
            for i, m in enumerate((10, 30))]
    reconcile_pass_run()
    JobEvent.objects.create(job=jobs[0], from_state="running", to_state="preempted", reason="preempted")

    rows = queue_history(days=7)

    assert [(r.queue, r.admissions, r.preemptions) for r in rows] == [("vision-main", 2, 1)]
    assert round(rows[0].p50_wait_s / 60) == 10 and round(rows[0].p95_wait_s / 60) == 30
    client.force_login(org["language-lead"])
    page = client.get("/history/").content.decode()
    assert 'id="history-data"' in page and "<td>vision-main</td><td>2</td>" in page and Job.objects.count() == 2
