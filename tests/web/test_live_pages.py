"""The live parts of the pages: htmx asks again for a fragment (HX-Request), the server answers with just that part;
use-over-time fragments per grouping and window; the plan list's filters; Cancel only where it can work."""

from __future__ import annotations

import time

import pytest

from scheduling.models import Job, PreemptionPlan
from scheduling.models.preemption import PlanStatus
from scheduling.services import reconcile_pass_run, job_cancel, job_submit, usage_collect
from tests.api.test_endpoints import _plan
from tests.conftest import H100

HTMX = {"HTTP_HX_REQUEST": "true"}


def submit(org, user="vision-researcher", queue="vision-main", name="live-job") -> Job:
    return job_submit(user=org[user], queue_name=queue, flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}], runtime_limit_s=3600)


@pytest.mark.parametrize("url, fragment_id", [("/", "job-table"), ("/fleet/", "fleet-live"), ("/preemptions/", "plan-table")])
def test_an_htmx_request_gets_only_the_live_fragment_which_asks_again_by_itself(browser_as, org, url, fragment_id):
    submit(org)
    client = browser_as("vision-researcher")
    full = client.get(url).content.decode()
    fragment = client.get(url, **HTMX).content.decode()
    assert f'id="{fragment_id}"' in full and "<html" in full
    assert fragment.lstrip().startswith(f'<div id="{fragment_id}"') and "<html" not in fragment
    assert 'hx-trigger="every' in fragment


def test_a_pending_job_page_refreshes_until_the_job_is_final_and_then_stops(browser_as, org):
    job = submit(org)
    client = browser_as("vision-researcher")
    page = client.get(f"/jobs/{job.pk}/", **HTMX).content.decode()
    assert 'id="job-live"' in page and "every 3s" in page and 'id="job-state">pending' in page

    reconcile_pass_run()
    assert 'id="job-state">admitted' in client.get(f"/jobs/{job.pk}/", **HTMX).content.decode()

    job_cancel(user=org["vision-researcher"], job_id=job.pk)
    final = client.get(f"/jobs/{job.pk}/", **HTMX).content.decode()
    assert "hx-trigger" not in final and "Cancel job" not in final


@pytest.mark.parametrize("username, sees_cancel", [("vision-researcher", True), ("vision-lead", True), ("language-lead", False)])
def test_cancel_is_offered_only_to_those_who_may_cancel_and_asks_first(browser_as, org, username, sees_cancel):
    job = submit(org)
    page = browser_as(username).get(f"/jobs/{job.pk}/").content.decode()
    assert ("Cancel job" in page) is sees_cancel
    if sees_cancel:
        assert 'data-confirm="#confirm-cancel"' in page and "Yes, cancel it" in page


def test_the_use_over_time_fragment_per_grouping_and_window_and_on_the_job_page(browser_as, org):
    job = submit(org)
    reconcile_pass_run()
    usage_collect(now=time.time() - 30)
    client = browser_as("language-lead")

    for by, name in (("team", "vision"), ("queue", "vision-main"), ("flavor", H100)):
        page = client.get(f"/fleet/usage/?by={by}&window=24h").content.decode()
        assert page.lstrip().startswith('<div id="usage-charts"') and f"<td>{name}</td>" in page
        assert f'data-usage-chart="usage-{by}-0"' in page and 'id="usage-' + by + '-0"' in page
    assert "window=1h&by=team" in client.get("/fleet/usage/?by=nonsense&window=forever").content.decode()

    job_page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-usage-chart="usage-job-0"' in job_page and "<td>job " in job_page
    assert client.get(f"/jobs/{job.pk}/usage/?window=7d").status_code == 200
    assert client.get("/jobs/9999/usage/").status_code == 404


def test_the_plan_list_hides_superseded_plans_and_filters_by_needs_approval_and_decided(browser_as, org):
    live = _plan(org)
    old = PreemptionPlan.objects.create(job=live.job, reason="quota", cost_gpu_hours=9.0, needs_approval=True,
                                        status=PlanStatus.SUPERSEDED)
    admin = browser_as("admin")

    def listed(show=""):
        page = admin.get(f"/preemptions/?show={show}" if show else "/preemptions/").content.decode()
        return {pk for pk in (live.pk, old.pk) if f'id="plan-{pk}"' in page}, page

    assert listed()[0] == {live.pk}  # an admin starts on "needs approval"
    _, page = listed()
    assert "waiting for an admin" in page and "· needs approval" not in page
    assert f'data-confirm="#confirm-approve-{live.pk}"' in page and "1.5 GPU·h" in page
    assert listed("decided")[0] == set()
    admin.post(f"/preemptions/{live.pk}/approve/")
    assert listed("decided")[0] == {live.pk} and listed("needs-approval")[0] == set()
    plans, page = listed("all")
    assert plans == {live.pk} and ">approved, runs on the next pass<" in page and "needs approval" not in page and "Approve…" not in page
