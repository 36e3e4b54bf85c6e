"""A team's page (its queues, use and borrowing over time, idle allocations, jobs and records) for its members and
admins; borrowing over time from the stored use rollups, with its numbers in tables."""

from __future__ import annotations

import time

import pytest

from scheduling.selectors.borrowing import borrowing_over_time, share_lending
from scheduling.services import reconcile_pass_run, job_submit, queue_update, usage_collect
from tests.conftest import H100
from tests.usage.test_usage_store import fixed_util

HTMX = {"HTTP_HX_REQUEST": "true"}


def borrow_and_collect(org, *, minutes: int = 3, util_percent: float = 80.0):
    """vision runs 48 GPUs on its nominal 32 (borrowing 16 of language's unused quota), for `minutes` collections."""
    now = time.time()
    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="wide-vision-run",
                     pod_sets=[{"name": "worker", "count": 6, "gpus_per_pod": 8}], runtime_limit_s=7200, now=now - 60 * minutes - 30)
    reconcile_pass_run(now=now - 60 * minutes - 20)
    for minutes_ago in range(minutes, 0, -1):
        usage_collect(now=now - 60 * minutes_ago, source=fixed_util({job.pk: util_percent}))
    return job


def test_borrowing_over_time_names_the_borrower_and_the_lender_per_minute(org):
    borrow_and_collect(org)
    (cohort,) = borrowing_over_time(window="1h")
    assert (cohort.cohort, cohort.flavor) == ("shared", H100)
    by_queue = {q.queue: q for q in cohort.queues}
    assert [q.queue for q in cohort.queues] == ["vision-main", "language-main"]
    assert sorted(set(by_queue["vision-main"].borrowed_gpus)) == [0.0, 16.0] and by_queue["vision-main"].peak_borrowed_gpus == 16
    assert sorted(set(by_queue["language-main"].lent_gpus)) == [0.0, 16.0] and not any(by_queue["language-main"].borrowed_gpus)
    assert sum(1 for v in by_queue["vision-main"].borrowed_gpus if v) == 3, "one bin per collected minute"
    assert (by_queue["vision-main"].mean_borrowed_gpus, by_queue["language-main"].mean_lent_gpus) == (16, 16), "over the minutes with data"
    assert [values for _, values in cohort.rows() if any(values)] == [[16.0, -16.0]] * 3
    assert borrowing_over_time(window="1h", team="vision")[0].queues == cohort.queues


def test_a_lender_with_a_lending_limit_lends_no_more_than_it(org):
    queue_update(actor=org["admin"], queue_name="language-main", quotas={H100: {"nominal": 32, "borrowing_limit": None, "lending_limit": 16}})
    borrow_and_collect(org, minutes=1)
    (cohort,) = borrowing_over_time(window="1h")
    assert max(next(q for q in cohort.queues if q.queue == "language-main").lent_gpus) == 16


@pytest.mark.parametrize("lendable, borrowed, shares", [
    ({"a": 30, "b": 10}, 20, {"a": 15, "b": 5}),
    ({"a": 30, "b": 10}, 100, {"a": 30, "b": 10}),
    ({"a": 0, "b": 0}, 8, {}),
    ({"a": 8}, 0, {}),
])
def test_borrowed_gpus_are_shared_out_over_the_lenders_in_proportion_to_what_each_could_lend(lendable, borrowed, shares):
    assert share_lending(lendable, borrowed) == shares


def test_no_borrowing_says_so(org):
    assert borrowing_over_time(window="24h") == []


@pytest.mark.parametrize("username, status", [("vision-researcher", 200), ("vision-lead", 200), ("admin", 200),
                                              ("language-lead", 403), ("outsider", 403)])
def test_a_team_page_is_for_its_members_and_admins(browser_as, org, username, status):
    assert browser_as(username).get("/teams/vision/").status_code == status
    assert browser_as(username).get("/teams/vision/usage/?window=24h").status_code == status
    assert browser_as(username).get("/teams/nope/").status_code == 404


def test_the_team_page_shows_its_queues_idle_allocations_use_borrowing_jobs_and_records(browser_as, org, settings):
    settings.GANGWAY_IDLE_GRACE_S = 240  # four of the five collected minutes: a slow machine still finds them
    job = borrow_and_collect(org, minutes=5, util_percent=4.0)
    queue_update(actor=org["vision-lead"], queue_name="vision-main", quotas={H100: {"nominal": 32, "borrowing_limit": 32, "lending_limit": None}})
    page = browser_as("vision-lead").get("/teams/vision/").content.decode()
    assert 'id="glance-vision-main"' in page and 'id="glance-language-main"' not in page
    assert "vision-main borrows 16" in page, "who borrows from whom, now"
    assert 'data-usage-chart="usage-job-0"' in page and 'data-borrowing-chart="borrowing-0"' in page
    assert f"#{job.pk} wide-vision-run" in page.split('id="idle"')[1], "the idle allocation is flagged"
    assert "48 GPUs held idle" in page.split('id="glance-vision-main"')[1], "and on its queue's glance"
    assert 'id="job-table"' in page and "wide-vision-run" in page.split('id="jobs"')[1]
    assert "queue.quota_update" in page.split('id="audit"')[1], "the lead's change is in the team's records"
    researcher = browser_as("vision-researcher").get("/teams/vision/").content.decode()
    assert 'id="audit"' not in researcher, "the audit log is for leads and admins"
    fragment = browser_as("vision-researcher").get("/teams/vision/", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="job-table"')


def test_a_member_of_one_team_goes_straight_to_it_and_an_admin_sees_every_team(browser_as, org):
    assert browser_as("vision-researcher").get("/teams/")["Location"] == "/teams/vision/"
    page = browser_as("admin").get("/teams/").content.decode()
    assert 'href="/teams/vision/"' in page and 'href="/teams/language/"' in page


def test_the_history_page_has_the_borrowing_chart_and_its_numbers(browser_as, org):
    borrow_and_collect(org)
    page = browser_as("language-researcher").get("/history/").content.decode()
    assert 'data-borrowing-chart="borrowing-0"' in page and "borrowing-numbers" in page and "<td>-16.0</td>" in page
    fragment = browser_as("language-researcher").get("/borrowing/?window=7d&team=vision").content.decode()
    assert fragment.lstrip().startswith('<div id="borrowing-charts"') and "vision-main" in fragment
    assert browser_as("language-researcher").get("/borrowing/?team=nope").status_code == 404
