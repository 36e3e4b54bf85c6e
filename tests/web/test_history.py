"""The history page: waits (p50/p95 per queue and day), admissions and preemptions, from job events, in charts and a table."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from scheduling.models import HistoryDay, Job, JobEvent, Queue
from scheduling.selectors.history import SETTLED_AFTER_S, _grouped_in_database, _grouped_in_python, _percentile, queue_history
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


def test_postgresql_groups_and_takes_the_same_nearest_rank_percentiles_as_python(org):
    if connection.vendor != "postgresql":
        pytest.skip("percentile_disc is PostgreSQL's; SQLite takes the Python path only")
    now = timezone.now()
    for i, minutes in enumerate((1, 4, 9, 16, 25, 36, 49)):
        job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"w{i}",
                         pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}],
                         now=(now - dt.timedelta(minutes=minutes)).timestamp())
        JobEvent.objects.create(job=job, from_state="pending", to_state="admitted", reason="admitted")
        if i % 3 == 0:
            JobEvent.objects.create(job=job, from_state="running", to_state="preempted", reason="preempted")
    names = dict(Queue.objects.values_list("pk", "name"))

    today = timezone.now().astimezone(dt.timezone.utc).date()
    week = (today - dt.timedelta(days=6), today + dt.timedelta(days=1))
    in_database = _grouped_in_database(*week, names)

    assert in_database == _grouped_in_python(*week, names)
    assert [(r.admissions, r.preemptions, round(r.p95_wait_s / 60)) for r in in_database] == [(7, 3, 49)]


def test_an_ended_day_is_computed_once_for_every_worker_and_today_read_each_time(org, django_assert_num_queries):
    now = timezone.now()
    yesterday = now - dt.timedelta(days=1)
    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="old",
                     pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1}], now=(yesterday - dt.timedelta(minutes=5)).timestamp())
    JobEvent.objects.filter(job=job).update(created_at=yesterday)
    JobEvent.objects.create(job=job, from_state="pending", to_state="admitted", reason="admitted")
    JobEvent.objects.filter(job=job, to_state="admitted").update(created_at=yesterday)
    day = yesterday.astimezone(dt.timezone.utc).date()
    noon = dt.datetime.combine(now.astimezone(dt.timezone.utc).date(), dt.time(12), tzinfo=dt.timezone.utc)
    assert [(r.day, r.admissions) for r in queue_history(days=7, now=noon)] == [(day, 1)]
    assert HistoryDay.objects.count() == 6, "each ended day stored, with its rows or none"

    JobEvent.objects.create(job=job, from_state="running", to_state="preempted", reason="preempted")
    with django_assert_num_queries(3):  # the stored days, the queues' names and today's events: what a fresh worker reads
        rows = queue_history(days=7, now=noon)

    assert [(r.admissions, r.preemptions) for r in rows] == [(1, 0), (0, 1)]


def test_yesterday_is_read_from_its_events_until_a_pass_begun_before_midnight_has_written_them(org):
    midnight = dt.datetime.combine(timezone.now().astimezone(dt.timezone.utc).date(), dt.time(), tzinfo=dt.timezone.utc)
    queue_history(days=7, now=midnight + dt.timedelta(seconds=SETTLED_AFTER_S - 1))
    assert midnight.date() - dt.timedelta(days=1) not in set(HistoryDay.objects.values_list("day", flat=True))
    queue_history(days=7, now=midnight + dt.timedelta(seconds=SETTLED_AFTER_S))
    assert midnight.date() - dt.timedelta(days=1) in set(HistoryDay.objects.values_list("day", flat=True))
