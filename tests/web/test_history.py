"""The history page: waits (p50/p95 per queue and day), admissions and preemptions, from job events, in charts and a table."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from scheduling.models import HistoryDay, Job, JobEvent, Queue
from scheduling.selectors.history import SETTLED_AFTER_S, _events_by_primary_key, _events_joined, _percentile, queue_history
from scheduling.services import job_submit, reconcile_pass_run
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


def test_postgresql_reads_each_events_job_by_primary_key_as_the_orms_join_does(org):
    if connection.vendor != "postgresql":
        pytest.skip("the LATERAL read is PostgreSQL's; SQLite takes the join only")
    now = timezone.now()
    for i, minutes in enumerate((1, 4, 9, 16, 25, 36, 49)):
        job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"w{i}",
                         pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}],
                         now=(now - dt.timedelta(minutes=minutes)).timestamp())
        JobEvent.objects.create(job=job, from_state="pending", to_state="admitted", reason="admitted")
        if i % 3 == 0:
            JobEvent.objects.create(job=job, from_state="running", to_state="preempted", reason="preempted")
    week = (now - dt.timedelta(days=7), now + dt.timedelta(minutes=1))

    by_primary_key = sorted(_events_by_primary_key(*week))
    joined = sorted(_events_joined(*week))
    assert [(at, queue, state, round(wait, 3)) for at, queue, state, wait in by_primary_key] == \
        [(at, queue, state, round(wait, 3)) for at, queue, state, wait in joined]
    assert [(r.admissions, r.preemptions, round(r.p95_wait_s / 60)) for r in queue_history(days=7)] == [(7, 3, 49)]


def test_an_ended_day_is_computed_once_for_every_worker_and_today_read_each_time(org, django_assert_num_queries):
    now = timezone.now()
    yesterday = now - dt.timedelta(days=1)
    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="old",
                     pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}], now=(yesterday - dt.timedelta(minutes=5)).timestamp())
    JobEvent.objects.filter(job=job).update(created_at=yesterday)
    JobEvent.objects.create(job=job, from_state="pending", to_state="admitted", reason="admitted")
    JobEvent.objects.filter(job=job, to_state="admitted").update(created_at=yesterday)
    day = yesterday.astimezone(dt.timezone.utc).date()
    settled = max(now, _midnight() + dt.timedelta(seconds=SETTLED_AFTER_S))  # yesterday has settled
    assert [(r.day, r.admissions) for r in queue_history(days=7, now=settled)] == [(day, 1)]
    assert HistoryDay.objects.count() == 6, "each ended day stored, with its rows or none"

    JobEvent.objects.create(job=job, from_state="running", to_state="preempted", reason="preempted")
    with django_assert_num_queries(3):  # the stored days, the queues' names and today's events: what a fresh worker reads
        rows = queue_history(days=7, now=settled)

    assert [(r.admissions, r.preemptions) for r in rows] == [(1, 0), (0, 1)]


def _midnight() -> dt.datetime:
    return dt.datetime.combine(timezone.now().astimezone(dt.timezone.utc).date(), dt.time(), tzinfo=dt.timezone.utc)


def test_yesterday_is_read_from_its_events_until_a_pass_begun_before_midnight_has_written_them(org):
    midnight = _midnight()
    queue_history(days=7, now=midnight + dt.timedelta(seconds=SETTLED_AFTER_S - 1))
    assert midnight.date() - dt.timedelta(days=1) not in set(HistoryDay.objects.values_list("day", flat=True))
    queue_history(days=7, now=midnight + dt.timedelta(seconds=SETTLED_AFTER_S))
    assert midnight.date() - dt.timedelta(days=1) in set(HistoryDay.objects.values_list("day", flat=True))


def test_todays_settled_events_are_read_once_and_each_view_reads_only_those_written_since(org, monkeypatch):
    from scheduling.selectors import history

    now = max(timezone.now(), _midnight() + dt.timedelta(hours=1))
    early = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="early",
                       pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}], now=(now - dt.timedelta(minutes=50)).timestamp())
    JobEvent.objects.create(job=early, from_state="pending", to_state="admitted", reason="admitted")
    JobEvent.objects.filter(job=early).update(created_at=now - dt.timedelta(minutes=40))  # settled: kept after one read
    assert [(r.admissions, round(r.p50_wait_s / 60)) for r in queue_history(days=1, now=now)] == [(1, 10)]

    late = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="late",
                      pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}], now=(now - dt.timedelta(minutes=3)).timestamp())
    JobEvent.objects.create(job=late, from_state="pending", to_state="admitted", reason="admitted")
    JobEvent.objects.filter(job=late).update(created_at=now - dt.timedelta(minutes=1))
    reads = []
    monkeypatch.setattr(history, "_events", lambda since, until: reads.append(since) or history._events_joined(since, until))
    rows = queue_history(days=1, now=now)

    assert [(r.admissions, round(r.p95_wait_s / 60)) for r in rows] == [(2, 10)]
    assert reads == [now - dt.timedelta(seconds=SETTLED_AFTER_S)], "the events since the kept ones, not the whole day"
