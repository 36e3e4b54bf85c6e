"""Real headless Chromium through Playwright against a live server, one test per flow: a submission whose admission
arrives without a reload, use-over-time and borrowing charts, the job list at phone width, an approval after its
confirmation named on the victim's event, a lead's previewed quota change found in the audit log, a quota form opened in
its row whose refusal shows there, and the placement list that keeps its open state across live refreshes."""

from __future__ import annotations

import datetime
import os
import shutil
import time

import pytest

from scheduling.models import AuditRecord, Job, PreemptionPlan, QueueQuota
from scheduling.services import reconcile_pass_run

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


def open_vision_quota(page) -> None:
    """Open vision-main's quota form in its row; once htmx has put the focus in it, the test types (typed earlier,
    a field's text could land in the field htmx focuses)."""
    page.click("a[aria-label='Change the H100-80GB quota of vision-main']")
    # htmx focuses the autofocus field as the swap settles; typing before the settle is over can land in that field.
    page.wait_for_function("document.activeElement.name === 'nominal'"
                           " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')")


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

    reconcile_pass_run()  # the worker's pass, as it happens a moment after the submission

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
    open_vision_quota(page)
    page.fill("input[aria-label='nominal vision-main H100-80GB']", "24")
    page.click("form[action*='vision-main'] button:has-text('Save')")
    page.wait_for_selector("text=Quota of vision-main for H100-80GB saved.")
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24


def test_use_over_time_borrowing_and_history_charts_render_with_data_and_no_errors(page, org):
    from scheduling.services import job_submit, usage_collect

    for team, pods in (("vision", 6), ("language", 1)):  # vision holds 48 GPUs on a nominal quota of 32: it borrows 16
        job_submit(user=org[f"{team}-researcher"], queue_name=f"{team}-main", flavor_name="H100-80GB", name=f"{team}-run",
                   pod_sets=[{"name": "worker", "count": pods, "gpus_per_pod": 8}], runtime_limit_s=3600)
    reconcile_pass_run()
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
    assert "vision\t48 GPUs" in page.inner_text("#usage-table")
    sent, drawn = page.evaluate("""() => { const chart = document.querySelector('#usage-charts [data-usage-chart]');
        return [JSON.parse(document.getElementById(chart.dataset.usageChart).textContent), chart.data[0].x]; }""")
    first = datetime.datetime.fromisoformat(sent["start"])  # the chart is sent its first bin and the step, not every time
    assert drawn == [(first + datetime.timedelta(seconds=i * sent["step_s"])).strftime("%Y-%m-%dT%H:%M:%S") for i in range(len(sent["used"]))]

    page.click("#usage-charts a.choice:text-is('flavor')")  # htmx swaps in the per-flavor charts, drawn again
    page.wait_for_selector("#usage-charts figcaption:has-text('H100-80GB')")
    page.wait_for_selector("#usage-charts [data-usage-chart][data-rendered=true]")

    page.goto("/history/")  # the admissions of this test, per queue and day; who borrowed from whom per minute
    page.wait_for_selector("#history-waits[data-rendered=true]")
    page.wait_for_selector("#history-counts[data-rendered=true]")
    assert page.locator("#history-counts .trace").count() == 2
    page.wait_for_selector("#borrowing-charts [data-borrowing-chart][data-rendered=true]")
    assert page.locator("#borrowing-charts .scatterlayer .trace").count() == 2  # vision borrows, language lends
    assert "16 GPUs" in page.inner_text("#borrowing-charts table.borrowing-summary")

    page.goto("/teams/vision/")
    page.wait_for_selector("#usage-charts [data-usage-chart][data-rendered=true]")
    page.wait_for_selector("#borrowing-charts [data-borrowing-chart][data-rendered=true]")
    page.click("#borrowing-charts a.choice:text-is('24h')")  # another window, drawn again
    page.wait_for_selector("#borrowing-charts a.choice.chosen:text-is('24h')")
    page.wait_for_selector("#borrowing-charts [data-borrowing-chart][data-rendered=true]")
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
    for url in ("/queues/", "/teams/vision/", "/preemptions/", "/history/", "/fleet/", "/jobs/new/"):  # wide tables scroll inside
        page.goto(url)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, url


def test_an_admin_approves_a_plan_after_the_confirmation_and_the_victims_event_names_them(page, org, every_plan_runs):
    from scheduling.models import JobEvent
    from scheduling.services import job_submit

    borrower = job_submit(user=org["language-researcher"], queue_name="language-main", flavor_name="H100-80GB", name="borrower",
                          pod_sets=[{"name": "worker", "count": 8, "gpus_per_pod": 8}], runtime_limit_s=7200)
    reconcile_pass_run()
    reconcile_pass_run()
    owner = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name="H100-80GB", name="reclaimer",
                       pod_sets=[{"name": "worker", "count": 2, "gpus_per_pod": 8}], runtime_limit_s=3600)
    reconcile_pass_run()
    plan = PreemptionPlan.objects.get(job=owner)

    login(page, "admin")
    page.click(".overview a:has-text('waiting for your decision')")  # the first screen says a plan waits
    page.fill(f"input[aria-label='comment on plan {plan.pk}']", "deadline")
    page.click(f"#plan-{plan.pk} button:has-text('Approve')")
    dialog = page.locator(f"#confirm-approve-{plan.pk}")
    dialog.wait_for(state="visible")
    assert f"#{borrower.pk}" in dialog.inner_text() and "language" in dialog.inner_text() and "GPU·h" in dialog.inner_text()
    assert PreemptionPlan.objects.get(pk=plan.pk).status == "proposed"  # nothing happened before the confirmation

    dialog.locator("button:has-text('Yes')").click()
    page.wait_for_selector(f"text=Plan {plan.pk} approved.")
    assert AuditRecord.objects.get(action="preemption.approve").comment == "deadline"
    reconcile_pass_run()  # the worker's next pass executes the approved plan

    page.goto(f"/jobs/{borrower.pk}/")
    page.wait_for_selector(f"text=preempted by plan #{plan.pk} for job #{owner.pk}, approved by admin")
    assert PreemptionPlan.objects.get(pk=plan.pk).status == "executed"
    assert JobEvent.objects.filter(job=borrower, reason="preempted").count() == 1
    page.goto("/audit/")
    assert "deadline" in page.inner_text("table.audit") and "preemption.approve" in page.inner_text("table.audit")


def test_a_lead_previews_and_saves_a_quota_change_and_finds_it_in_the_audit_log(page, org):
    login(page, "vision-lead")
    page.goto("/queues/")
    open_vision_quota(page)
    page.fill("input[aria-label='nominal vision-main H100-80GB']", "24")
    page.click("#quota-vision-main-H100-80GB button:has-text('Preview')")
    page.wait_for_selector("h1:has-text('Preview: queue vision-main, H100-80GB')")
    assert "nominal 24" in page.inner_text("main") and QueueQuota.objects.get(queue__name="vision-main").nominal == 32

    page.click("button:has-text('Save this change')")
    page.wait_for_selector("text=Quota of vision-main for H100-80GB saved.")
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24

    page.click("nav >> text=Audit")
    row = page.locator("table.audit tbody tr").first
    assert "vision-lead" in row.inner_text() and "queue.quota_update" in row.inner_text()
    assert "quotas.H100-80GB.nominal: 32 → 24" in row.inner_text()

    page.goto("/queues/")  # a refused change: the error beside its field, the typed value kept
    open_vision_quota(page)
    page.fill("input[aria-label='borrowing limit vision-main H100-80GB']", "100000")
    page.click("#quota-vision-main-H100-80GB button:has-text('Save')")
    page.wait_for_selector("#id_vision-main_H100-80GB_borrowing_limit_error:has-text('more than the 64 H100-80GB GPUs')")
    assert page.input_value("input[aria-label='borrowing limit vision-main H100-80GB']") == "100000"
    page.wait_for_function("document.activeElement.name === 'borrowing_limit'")  # htmx focuses it as the row settles


def test_a_quota_form_opens_in_its_row_and_a_refused_change_shows_its_error_there_without_a_reload(page, org):
    login(page, "vision-lead")
    page.goto("/queues/")
    assert page.locator("form#quota-vision-main-H100-80GB").count() == 0, "no form until asked for"
    page.evaluate("window.notReloaded = true")
    open_vision_quota(page)  # and the opened form has the focus
    nominal = page.locator("input[aria-label='nominal vision-main H100-80GB']")

    nominal.fill("99")  # above the team's allotment of 32
    with page.expect_response(lambda response: response.request.method == "POST") as answer:
        page.click("#quota-vision-main-H100-80GB button:has-text('Save')")
    assert answer.value.status == 400
    page.wait_for_selector("#id_vision-main_H100-80GB_nominal_error:has-text('its allotment is 32')")
    assert page.evaluate("window.notReloaded") is True, "the row was swapped, the page not reloaded"
    assert nominal.input_value() == "99"
    page.wait_for_function("document.activeElement.name === 'nominal'")  # on the field with the error
    assert page.locator("#glance").count() == 1, "the rest of the page is still there"

    nominal.fill("24")
    page.click("#quota-vision-main-H100-80GB button:has-text('Save')")
    page.wait_for_selector("text=Quota of vision-main for H100-80GB saved.")  # the queues page again, with the change
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24
    assert "24 · ∞ · all" in page.inner_text("#queue-vision-main")


def test_the_placement_list_keeps_its_open_or_closed_state_across_live_refreshes(page, org):
    from scheduling.services import job_submit

    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name="H100-80GB", name="many-pods",
                     pod_sets=[{"name": "worker", "count": 12, "gpus_per_pod": 1}], runtime_limit_s=3600)
    reconcile_pass_run()
    login(page, "vision-researcher")
    page.goto(f"/jobs/{job.pk}/")
    assert page.evaluate("document.getElementById('placement').open") is False  # 12 pods: folded at first
    swaps = "new Promise(resolve => document.addEventListener('htmx:afterSwap', () => resolve(true), {once: true}))"
    for wanted in (True, False):
        page.click("#placement summary")
        assert page.evaluate("document.getElementById('placement').open") is wanted
        assert page.evaluate(swaps) is True  # the live part was swapped in again
        assert page.evaluate("document.getElementById('placement').open") is wanted
