"""Stored GPU use: collection attributes samples to jobs and teams, the report shows allocation vs use and idle
allocations, in the API and on the fleet page; the beat schedule collects every minute."""

from __future__ import annotations

import pytest

from scheduling.models import GpuUsageSample, Job, QueueUsageRollup, Team, UsageRollup
from scheduling.selectors import usage_over_time, usage_report
from scheduling.services import reconcile_pass_run, job_submit, usage_collect
from scheduling.services.common import to_datetime
from scheduling.usage import GpuUsageSample as Sample
from scheduling.usage import UsageError
from tests.conftest import H100

pytestmark = pytest.mark.django_db
T0 = 1_800_000_000.0


def submit(org, *, user="vision-researcher", queue="vision-main", count=1, name="job") -> Job:
    return job_submit(user=org[user], queue_name=queue, flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": count, "gpus_per_pod": 8}], runtime_limit_s=36000, now=T0)


def fixed_util(util_by_job: dict[int, float]):
    """A usage source giving every allocated GPU of a job the same utilisation."""

    def source(at, allocations):
        return [
            Sample(node=node, gpu=str(i), pod=None, namespace=None, util_percent=util_by_job[job_id], fb_used_mib=1000.0, at=at, job_id=job_id)
            for job_id, node, gpus in allocations for i in range(gpus)
        ]

    return source


@pytest.fixture
def busy_and_idle(org, settings):
    settings.GANGWAY_IDLE_GRACE_S = 120
    busy = submit(org, count=2, name="busy")
    idle = submit(org, user="language-researcher", queue="language-main", count=1, name="notebook")
    reconcile_pass_run(now=T0 + 1)
    source = fixed_util({busy.pk: 90.0, idle.pk: 4.0})
    for minute in range(3):
        usage_collect(now=T0 + 60 * (minute + 1), source=source)
    return busy, idle


def test_the_simulated_source_samples_every_allocated_gpu_with_its_job_and_team(org):
    job = submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)

    result = usage_collect(now=T0 + 60)

    assert (result.samples, result.attributed) == (16, 16)
    assert set(GpuUsageSample.objects.values_list("job_id", "team__name")) == {(job.pk, "vision")}
    assert GpuUsageSample.objects.values("node_name").distinct().count() == 2


def test_allocation_vs_use_per_team_and_the_idle_allocation(busy_and_idle, org):
    busy, idle = busy_and_idle

    report = usage_report(user=org["admin"], now=T0 + 200, window_s=180)

    assert report.collections == 3
    teams = {t.team: (t.allocated_gpus, t.used_gpus, t.use_percent, t.idle_gpus) for t in report.teams}
    assert teams == {"vision": (16, 14.4, 90.0, 0), "language": (8, 0.32, 4.0, 8)}
    assert [(a.job_id, a.job_name, a.team, a.gpus, a.mean_util_percent) for a in report.idle] == [(idle.pk, "notebook", "language", 8, 4.0)]


def test_a_job_is_an_idle_allocation_only_after_the_grace_period_as_the_last_collection_found(busy_and_idle, org, settings):
    busy, idle = busy_and_idle
    source = fixed_util({busy.pk: 90.0, idle.pk: 4.0})
    settings.GANGWAY_IDLE_GRACE_S = 600  # admitted at T0 + 1: not idle for ten minutes yet at T0 + 240
    usage_collect(now=T0 + 240, source=source)
    assert usage_report(user=org["admin"], now=T0 + 250).idle == []
    settings.GANGWAY_IDLE_GRACE_S = 120
    usage_collect(now=T0 + 300, source=source)
    assert [a.job_id for a in usage_report(user=org["admin"], now=T0 + 310).idle] == [idle.pk]


def test_the_queues_rollups_add_up_to_the_jobs_rollups(busy_and_idle):
    from django.db.models import Sum

    totals = [model.objects.aggregate(a=Sum("allocated_gpu_s"), u=Sum("used_gpu_s")) for model in (UsageRollup, QueueUsageRollup)]
    assert totals[0] == totals[1] and QueueUsageRollup.objects.count() == 6  # three minutes of two queues


@pytest.mark.parametrize("seconds_after_the_last_collection", [5, 59, 110])
def test_an_idle_job_stays_flagged_between_collections_with_a_grace_period_of_a_minute(busy_and_idle, org, settings,
                                                                                     seconds_after_the_last_collection):
    busy, idle = busy_and_idle
    settings.GANGWAY_IDLE_GRACE_S = 60
    usage_collect(now=T0 + 240, source=fixed_util({busy.pk: 90.0, idle.pk: 4.0}))
    now = T0 + 240 + seconds_after_the_last_collection
    assert [a.job_id for a in usage_report(user=org["admin"], now=now).idle] == [idle.pk]


def test_the_minute_bucket_the_grace_period_starts_in_counts_toward_an_idle_jobs_mean(org, settings):
    settings.GANGWAY_IDLE_GRACE_S, settings.GANGWAY_IDLE_THRESHOLD_PERCENT = 60, 10
    job = submit(org, count=1)
    reconcile_pass_run(now=T0 + 1)
    usage_collect(now=T0 + 60, source=fixed_util({job.pk: 0.0}))  # the bucket from T0 + 60, where the grace period starts
    usage_collect(now=T0 + 150, source=fixed_util({job.pk: 15.0}))  # the bucket from T0 + 120; grace period T0 + 90 .. 150
    assert [(a.job_id, a.mean_util_percent) for a in usage_report(user=org["admin"], now=T0 + 155).idle] == [(job.pk, 7.5)]


def test_each_collection_adds_a_minute_rollup_per_held_job_with_use_capped_at_allocation(org):
    job = submit(org, count=1)
    reconcile_pass_run(now=T0 + 1)
    node = job.placements.get().node.name

    def twice_reported(at, allocations):  # a metrics source that reports every GPU twice at 100 %
        return [Sample(node=node, gpu=str(i % 8), pod=None, namespace=None, util_percent=100.0, fb_used_mib=None, at=at, job_id=job.pk)
                for i in range(16)]

    usage_collect(now=T0 + 61, source=twice_reported)

    rollup = UsageRollup.objects.get()
    assert (rollup.start.timestamp(), rollup.bucket_s, rollup.job_id, rollup.team.name, rollup.queue.name, rollup.flavor.name) == (
        T0 + 60, 60, job.pk, "vision", "vision-main", H100)
    assert (rollup.allocated_gpu_s, rollup.used_gpu_s) == (8 * 60, 8 * 60)


def test_minute_rollups_older_than_a_day_are_compacted_into_hours_keeping_the_totals(busy_and_idle, org):
    before = UsageRollup.objects.aggregate(a=__import__("django.db.models", fromlist=["Sum"]).Sum("allocated_gpu_s"))["a"]
    busy, idle = busy_and_idle

    result = usage_collect(now=T0 + 27 * 3600, source=fixed_util({busy.pk: 90.0, idle.pk: 4.0}))

    assert result.compacted == 6  # three minutes of two jobs
    hours = UsageRollup.objects.filter(bucket_s=3600)
    assert sorted((h.job_id, h.allocated_gpu_s, round(h.used_gpu_s, 1)) for h in hours) == sorted(
        [(busy.pk, 16 * 60 * 3.0, 16 * 60 * 3 * 0.9), (idle.pk, 8 * 60 * 3.0, round(8 * 60 * 3 * 0.04, 1))])
    assert sum(h.allocated_gpu_s for h in hours) == before


def test_use_over_time_per_team_bins_the_rollups_and_keeps_use_below_allocation(busy_and_idle, org):
    series = {s.name: s for s in usage_over_time(by="team", window="1h", now=T0 + 200)}

    assert list(series) == ["vision", "language"]  # busiest first
    vision = series["vision"]
    assert len(vision.points) == 61 and vision.use_percent == 90.0
    assert [(p.allocated_gpus, p.used_gpus) for p in vision.points if p.allocated_gpus] == [(16.0, 14.4)] * 3
    assert all(p.used_gpus <= p.allocated_gpus for s in series.values() for p in s.points)
    assert [s.name for s in usage_over_time(by="flavor", window="7d", now=T0 + 200)] == [H100]


def test_each_minute_of_use_over_time_is_one_bin_of_the_chart(org):
    """Bins start where the database says the rollups start, in epoch seconds (SQLite's julianday puts about half the
    minutes some microseconds early): each minute is its own bin, never two in one beside an empty one."""
    vision = Team.objects.get(name="vision")
    QueueUsageRollup.objects.bulk_create(
        QueueUsageRollup(start=to_datetime(T0 + 60 * minute), bucket_s=60, team=vision, allocated_gpu_s=8 * 60.0, used_gpu_s=0.0)
        for minute in range(30)
    )
    (series,) = usage_over_time(by="team", window="1h", now=T0 + 30 * 60)
    assert [p.allocated_gpus for p in series.points if p.allocated_gpus] == [8.0] * 30


def test_samples_older_than_the_window_do_not_count_and_old_ones_are_pruned(busy_and_idle, org, settings):
    assert usage_report(user=org["admin"], now=T0 + 3600 * 5).collections == 0
    settings.GANGWAY_USAGE_RAW_RETENTION_S = 3600
    busy, idle = busy_and_idle

    result = usage_collect(now=T0 + 7200, source=fixed_util({busy.pk: 50.0, idle.pk: 50.0}))

    assert result.pruned == 24 * 3
    assert GpuUsageSample.objects.count() == 24


def test_prometheus_samples_are_matched_to_jobs_by_pod_name_and_node(org):
    job = submit(org, count=1, name="train")
    reconcile_pass_run(now=T0 + 1)
    Job.objects.filter(pk=job.pk).update(cluster_namespace="research", cluster_name="train")
    node = job.placements.get().node.name

    def prometheus_like(at, allocations):
        return [
            Sample(node=node, gpu="0", pod="train-0-x7k2p", namespace="research", util_percent=97.0, fb_used_mib=70000.0, at=at),
            Sample(node=node, gpu="1", pod="jupyter-7", namespace="vision", util_percent=3.0, fb_used_mib=500.0, at=at),
            Sample(node=node, gpu="2", pod=None, namespace=None, util_percent=0.0, fb_used_mib=None, at=at),
        ]

    usage_collect(now=T0 + 60, source=prometheus_like)

    assert list(GpuUsageSample.objects.order_by("gpu").values_list("gpu", "job_id", "team__name")) == [
        ("0", job.pk, "vision"), ("1", None, None), ("2", job.pk, "vision")]


def test_with_a_prometheus_url_the_collection_reads_prometheus(org, settings):
    settings.GANGWAY_PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens: the error names it, the task retries
    with pytest.raises(UsageError, match="unreachable"):
        usage_collect(now=T0)
    assert not GpuUsageSample.objects.exists()


def test_a_real_cluster_without_prometheus_gets_no_made_up_samples(org, settings):
    settings.GANGWAY_CLUSTER = "kubernetes"
    assert usage_collect(now=T0).samples == 0


def move_to_now() -> None:
    """The collections happened a minute ago, the jobs were admitted an hour ago."""
    import datetime

    from django.utils import timezone

    now = timezone.now()
    GpuUsageSample.objects.update(at=now - datetime.timedelta(minutes=1))
    UsageRollup.objects.update(start=now - datetime.timedelta(minutes=1))
    QueueUsageRollup.objects.update(start=now - datetime.timedelta(minutes=1))
    Job.objects.update(admitted_at=now - datetime.timedelta(hours=1))


def test_the_usage_endpoint_hides_names_of_other_teams_jobs_and_stays_flat(busy_and_idle, client_as, django_assert_max_num_queries):
    busy, idle = busy_and_idle
    with django_assert_max_num_queries(8):
        body = client_as("vision-researcher").get("/api/v1/usage/?window_s=86400000").json()
    assert body == {"window_s": ["must be between 60 and 604800 seconds"]}

    body = client_as("vision-researcher").get("/api/v1/usage/").json()
    assert body["window_s"] == 3600 and body["idle_threshold_percent"] == 10.0
    assert {t["team"] for t in body["teams"]} == {"vision", "language"}
    # The samples were taken at T0 + 60..180; "now" is today, so nothing is in the window: zero use, no idle.
    assert body["collections"] == 0

    move_to_now()
    body = client_as("vision-researcher").get("/api/v1/usage/").json()
    assert body["idle"] == [{"job_id": idle.pk, "job_name": None, "team": "language", "gpus": 8, "mean_util_percent": 4.0}]
    assert client_as("language-lead").get("/api/v1/usage/").json()["idle"][0]["job_name"] == "notebook"


def test_the_fleet_page_shows_allocation_vs_use_and_the_idle_allocation(busy_and_idle, client, org):
    busy, idle = busy_and_idle
    move_to_now()
    client.force_login(org["language-lead"])

    page = client.get("/fleet/").content.decode()

    assert "Allocation vs use" in page
    assert f"#{idle.pk} notebook" in page and "4.0%" in page


def test_beat_collects_usage_every_minute_and_the_task_calls_the_service(org, settings):
    from portal.celery import app
    from scheduling.tasks import collect_usage

    app.finalize()
    schedule = app.conf.beat_schedule
    assert schedule["reconcile"]["task"] == "scheduling.tasks.reconcile"
    assert schedule["collect-usage"]["task"] == "scheduling.tasks.collect_usage"
    assert schedule["collect-usage"]["schedule"] == 60
    submit(org)
    reconcile_pass_run()
    assert collect_usage.apply().get() == {"samples": 8, "attributed": 8, "pruned": 0}
