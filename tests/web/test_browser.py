"""Real headless Chromium through Playwright against a live server: log in, submit, edit a quota, approve, charts."""

from __future__ import annotations

import os
import shutil

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
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
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


def test_a_lead_submits_a_job_edits_a_quota_and_an_admin_approves_a_plan(page, org):
    login(page, "vision-lead")
    page.click("nav >> text=Submit")
    page.fill("input[name=name]", "browser-gang")
    page.fill("input[name=pods-0-count]", "2")
    page.fill("input[name=pods-0-gpus_per_pod]", "8")
    page.click("button:has-text('Submit')")
    page.wait_for_selector("text=Why is it pending?")
    job = Job.objects.get(name="browser-gang")
    admission_cycle_run()
    page.reload()
    assert page.locator(".state").first.inner_text() == "admitted"
    assert page.locator("table.grid tbody tr").count() >= 2  # the placement table

    page.goto("/jobs/new/")
    page.fill("input[name=name]", "too-wide")
    page.fill("input[name=pods-0-gpus_per_pod]", "16")
    page.click("button:has-text('Submit')")
    page.wait_for_selector("text=the largest H100-80GB node has 8 allocatable")

    page.goto("/queues/")
    page.fill("input[aria-label='nominal vision-main H100-80GB']", "24")
    page.click("form[action*='vision-main'] button:has-text('Save')")
    page.wait_for_selector("text=Quota of vision-main for H100-80GB saved.")
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24

    page.goto("/fleet/")
    page.wait_for_selector("#rack-heatmap[data-rendered=true]")
    assert page.locator("#rack-heatmap .main-svg").count() >= 1

    from tests.api.test_endpoints import _plan

    plan = _plan(org)
    page.click("button:has-text('Log out')")
    login(page, "admin")
    page.goto("/preemptions/")
    page.fill(f"input[aria-label='comment on approving plan {plan.pk}']", "deadline")
    page.click("button:has-text('Approve')")
    page.click("dialog[open] button:has-text('Yes, preempt')")
    page.wait_for_selector(f"text=Plan {plan.pk} approved.")
    assert AuditRecord.objects.get(action="preemption.approve").comment == "deadline"
    assert PreemptionPlan.objects.get(pk=plan.pk).status == "approved"
    assert job.pk
