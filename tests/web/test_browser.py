"""Real headless Chromium through Playwright against a live server, one test per flow: a submission whose admission
arrives without a reload, use-over-time charts, the job list at phone width, an approval after its confirmation."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from scheduling.models import AuditRecord, Job, PreemptionPlan, QueueQuota
from scheduling.services import admission_cycle_run

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("GANGWAY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def page(transactional_db, live_server, monkeypatch):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("GANGWAY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"Chromium not found at {CHROMIUM}")
        pytest.skip("no Chromium on this machine (CI installs it; set GANGWAY_CHROMIUM to point at one)")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the sync Playwright API runs an event loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        context = browser.new_context(base_url=live_server.url)
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()
    from django.db import connections

    connections.close_all()  # the sync Playwright loop leaves this thread's connection marked async-unsafe


def login(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "gangway")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Jobs")


def test_a_researcher_submits_and_sees_the_admission_arrive_without_reloading(page, org):
    login(page, "vision-researcher")
    page.click("nav >> text=Submit")
    page.fill("input[name=name]", "browser-gang")
    page.fill("input[name=pods-0-count]", "2")
    page.fill("input[name=pods-0-gpus_per_pod]", "8")
    page.click("button:has-text('Submit')")
    page.wait_for_selector("#job-state:text-is('pending')")
    page.evaluate("window.notReloaded = true")

    admission_cycle_run()  # the worker's pass, as it happens a moment after the submission

    page.wait_for_selector("#job-state:text-is('admitted')")  # htmx swapped the live part in
    assert page.evaluate("window.notReloaded") is True
    assert "UTC" in page.inner_text("#job-admitted")
    assert page.locator("#job-live table.grid tbody tr").count() >= 2  # the placement table

    page.goto("/jobs/new/")
    page.fill("input[name=name]", "too-wide")
    page.fill("input[name=pods-0-gpus_per_pod]", "16")
    page.click("button:has-text('Submit')")
    page.wait_for_selector("text=the largest H100-80GB node has 8 allocatable")
    assert page.input_value("input[name=name]") == "too-wide"  # the typed value is kept

    page.goto("/queues/")
    page.click("button:has-text('Log out')")
    login(page, "vision-lead")
    page.goto("/queues/")
    page.fill("input[aria-label='nominal vision-main H100-80GB']", "24")
    page.click("form[action*='vision-main'] button:has-text('Save')")
    page.wait_for_selector("text=Quota of vision-main for H100-80GB saved.")
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24


def test_use_over_time_and_history_charts_render_with_data_and_no_errors(page, org):
    from scheduling.services import job_submit, usage_collect

    for team in ("vision", "language"):
        job_submit(user=org[f"{team}-researcher"], queue_name=f"{team}-main", flavor_name="H100-80GB", name=f"{team}-run",
                   pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}], runtime_limit_s=3600)
    admission_cycle_run()
    for minutes_ago in (3, 2, 1):
        usage_collect(now=time.time() - 60 * minutes_ago)
    problems = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.on("response", lambda response: problems.append(f"{response.status}: {response.url}") if response.status >= 400 else None)

    login(page, "vision-lead")
    page.goto("/fleet/")
    page.wait_for_selector("#rack-heatmap[data-rendered=true]")
    page.wait_for_selector("#usage-charts [data-usage-chart][data-rendered=true]")
    assert page.locator("#usage-charts [data-usage-chart]").count() == 2  # one per team with use
    assert page.locator("#usage-charts [data-usage-chart] .scatterlayer .trace").count() == 4  # allocated and used each
    assert "vision\t8 GPUs" in page.inner_text("#usage-table")

    page.click("#usage-charts a.choice:text-is('flavor')")  # htmx swaps in the per-flavor charts, drawn again
    page.wait_for_selector("#usage-charts figcaption:has-text('H100-80GB')")
    page.wait_for_selector("#usage-charts [data-usage-chart][data-rendered=true]")

    page.goto("/history/")  # the admissions of this test, per queue and day
    page.wait_for_selector("#history-waits[data-rendered=true]")
    page.wait_for_selector("#history-counts[data-rendered=true]")
    assert page.locator("#history-counts .trace").count() == 2
    assert problems == []


def test_the_job_list_at_390_px_has_no_horizontal_scroll(page, org):
    from scheduling.services import job_submit

    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name="H100-80GB", name="x" * 200,
               pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 1}])
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "vision-researcher")
    page.goto("/")
    page.wait_for_selector("text=" + "x" * 20)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_an_admin_approves_a_plan_after_a_confirmation_showing_victims_and_cost(page, org):
    from tests.api.test_endpoints import _plan

    plan = _plan(org)
    login(page, "admin")
    page.goto("/preemptions/")
    page.fill(f"input[aria-label='comment on plan {plan.pk}']", "deadline")
    page.click(f"#plan-{plan.pk} button:has-text('Approve')")
    dialog = page.locator(f"#confirm-approve-{plan.pk}")
    dialog.wait_for(state="visible")
    assert "1.5 GPU·h" in dialog.inner_text() and "language" in dialog.inner_text()
    assert PreemptionPlan.objects.get(pk=plan.pk).status == "proposed"  # nothing happened before the confirmation

    dialog.locator("button:has-text('Yes')").click()
    page.wait_for_selector(f"text=Plan {plan.pk} approved.")
    assert AuditRecord.objects.get(action="preemption.approve").comment == "deadline"
    assert PreemptionPlan.objects.get(pk=plan.pk).status == "approved"
