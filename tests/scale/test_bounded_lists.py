"""Lists at scale: keyset pages (no count), a capped ?limit, unknown query parameters refused, list rows
without explanations, and query counts that do not grow with the number of jobs."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from portal.api.pagination import MAX_PAGE_SIZE
from scheduling.clock import clock_set
from scheduling.models import HistoryDay, Job, SubmissionHour
from scheduling.services import reconcile_pass_run, job_submit
from tests.conftest import H100


def submit(org, n: int, *, start: int = 0) -> None:
    for i in range(start, start + n):
        team = "vision" if i % 2 else "language"
        job_submit(user=org[f"{team}-researcher"], queue_name=f"{team}-main", flavor_name=H100, name=f"j{i}",
                   pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1 + i % 4}], now=1_000_000 + i)


@pytest.mark.parametrize("url, parameter", [
    ("/api/v1/jobs/?status=pending", "status"),
    ("/api/v1/jobs/?page=2", "page"),
    ("/api/v1/jobs/?offset=100", "offset"),
    ("/api/v1/nodes/?flavor=H100", "flavor"),
])
def test_an_unknown_query_parameter_is_a_400_naming_it(client_as, url, parameter):
    response = client_as("admin").get(url)
    assert response.status_code == 400
    assert parameter in response.json()


@pytest.mark.parametrize("limit", ["0", "-1", "ten"])
def test_a_limit_that_is_not_a_positive_number_is_a_400(client_as, limit):
    response = client_as("admin").get(f"/api/v1/jobs/?limit={limit}")
    assert response.status_code == 400 and "limit" in response.json()


def test_the_job_list_caps_limit_and_walks_every_job_once_by_its_cursors(client_as, org, settings):
    submit(org, 7)
    client = client_as("admin")
    assert len(client.get("/api/v1/jobs/?limit=100000").json()["results"]) == 7  # capped at MAX_PAGE_SIZE, not refused
    seen, url = [], "/api/v1/jobs/?limit=3"
    while url:
        page = client.get(url).json()
        assert "count" not in page
        seen += [job["id"] for job in page["results"]]
        url = page["next"]
    assert len(seen) == len(set(seen)) == 7
    assert seen == sorted(seen, reverse=True)  # newest first
    assert MAX_PAGE_SIZE == 500


def test_list_rows_carry_a_one_line_why_and_the_detail_the_explanation(client_as, org):
    submit(org, 1)
    job_submit(user=org["language-researcher"], queue_name="language-main", flavor_name=H100, name="huge",
               pod_sets=[{"name": "w", "count": 8, "gpus_per_pod": 8}])
    reconcile_pass_run()
    client = client_as("admin")
    (huge,) = [j for j in client.get("/api/v1/jobs/?state=pending").json()["results"] if j["name"] == "huge"]
    assert "explanation" not in huge and huge["why"]
    assert client.get(f"/api/v1/jobs/{huge['id']}/").json()["explanation"]["summary"]


def test_the_web_job_list_pages_by_keyset_links_both_ways(org, client):
    submit(org, 120)
    client.force_login(org["admin"])
    first = client.get("/").context["page"]
    assert len(first["jobs"]) == 50 and first["newer_than"] is None
    second = client.get(f"/?older={first['older_than']}").context["page"]
    assert second["jobs"][0].pk < first["jobs"][-1].pk
    back = client.get(f"/?newer={second['newer_than']}").context["page"]
    assert [j.pk for j in back["jobs"]] == [j.pk for j in first["jobs"]]
    third = client.get(f"/?older={second['older_than']}").context["page"]
    assert len(third["jobs"]) == 20 and third["older_than"] is None


# Every page and list endpoint, with the most queries it may make (at both sizes below). The job list's line of what
# needs attention costs six (idle allocations, the reader's teams, the queues with their quotas and GPUs in use that
# also fill the queue filter, the allotments, plans waiting); the history's borrowing over time two (quotas, the
# queues' rollups) and its ended days three when none is stored yet (measured so: read, computed, stored); a job's
# page one (its open plan); a team's page, to an admin, nine for the gaming signals (one per signal, whatever the
# number of jobs, the submissions four: the window's two ends, its stored hours and their sum) and five more when the
# hours are not stored yet (measured so, as the team page is asked for first: counted, stored in a transaction);
# /gaming/ the same nine for every team at once. The queues page shows values; a change form is asked for on its own (its row: the queue with
# its quotas and GPUs in use, or the allotment).
PAGES = {
    "/": 11, "/?state=pending": 11, "/?queue=vision-main": 12, "/?team=vision": 12, "/fleet/": 9, "/fleet/usage/?by=queue": 4,
    "/queues/": 9, f"/queues/vision-main/quotas/{H100}/": 5, f"/teams/vision/allotments/{H100}/": 3, "/preemptions/": 3,
    "/history/": 9, "/borrowing/?window=24h": 4, "/audit/": 5, "/jobs/new/": 6, "/teams/": 7, "/teams/vision/": 35,
    "/gaming/": 11,
    "/api/v1/jobs/": 4, "/api/v1/jobs/?state=pending": 4, "/api/v1/jobs/?team=vision": 5, "/api/v1/nodes/": 3,
    "/api/v1/fleet/": 3, "/api/v1/queues/": 5, "/api/v1/teams/": 7, "/api/v1/preemptions/": 3, "/api/v1/usage/": 6,
    "/api/v1/priority-classes/": 3, "/api/v1/audit/": 3,
}


def _queries(client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    return len(captured)


def _sized_pages(client) -> dict[str, int]:
    """Every page, the detail of the oldest job (web and API, with its explanation) and the list pages older and
    newer than the middle job (web links and the API's next cursor): queries each, with nothing cached."""
    from django.core.cache import cache

    cache.clear()
    HistoryDay.objects.all().delete()
    SubmissionHour.objects.all().delete()
    pending = Job.objects.filter(state="pending").order_by("pk").values_list("pk", flat=True).first()
    middle = Job.objects.order_by("-submitted_at", "-id").values_list("pk", flat=True)[Job.objects.count() // 2]
    cursor = client.get("/api/v1/jobs/?limit=3").json()["next"].split("/api/v1/jobs/")[1]
    urls = {**PAGES, f"/jobs/{pending}/": 14, f"/api/v1/jobs/{pending}/": 9, f"/?older={middle}": 12, f"/?newer={middle}": 12,
            f"/api/v1/jobs/{cursor}": 4, f"/jobs/{pending}/usage/?window=24h": 7}
    return {url.replace(str(pending), "<pending>").replace(str(middle), "<middle>").split("cursor=")[0]: (_queries(client, url), limit)
            for url, limit in urls.items()}


@pytest.fixture
def away_from_midnight():
    """The clock running from today's noon (UTC): in the first minutes after midnight the history page reads
    yesterday's events once more while they settle (selectors.history.SETTLED_AFTER_S), one query over its bound."""
    started = time.time()
    noon = dt.datetime.combine(dt.datetime.now(dt.timezone.utc).date(), dt.time(12), tzinfo=dt.timezone.utc).timestamp()
    with clock_set(lambda: noon + time.time() - started):
        yield


@pytest.mark.usefixtures("away_from_midnight")
def test_every_page_makes_as_many_queries_with_80_jobs_as_with_8_and_no_more_than_its_bound(org, client, settings):
    from scheduling.services import usage_collect

    settings.GANGWAY_IDLE_GRACE_S = 0
    # Every job is listed idle at once; the scheduler's own grace stays long, so idle jobs do not become victims
    # (core.idle) and both sizes show the same pages without preemption plans.
    settings.GANGWAY_SCHEDULER = {**(getattr(settings, "GANGWAY_SCHEDULER", {}) or {}), "idle_grace_s": 1e9}
    client.force_login(org["admin"])
    submit(org, 8)
    job_submit(user=org["admin"], queue_name="language-main", flavor_name=H100, name="waits", priority=-10,
               pod_sets=[{"name": "w", "count": 8, "gpus_per_pod": 8}])  # both sizes list pending jobs
    reconcile_pass_run()
    usage_collect()  # both sizes have use to show and idle jobs to list
    small = _sized_pages(client)
    submit(org, 72, start=8)
    reconcile_pass_run()
    usage_collect()
    large = _sized_pages(client)
    assert {url: count for url, (count, _) in large.items()} == {url: count for url, (count, _) in small.items()}
    assert {url: count for url, (count, limit) in large.items() if count > limit} == {}
