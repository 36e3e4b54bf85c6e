"""Server-rendered pages: login, job list, submit form (same validation as the API), detail, fleet, queues, plans."""

from __future__ import annotations

import re

import pytest

from scheduling.models import Job, QueueQuota, TeamAllotment
from scheduling.services import reconcile_pass_run
from portal.staticfinders import vendored_path
from tests.conftest import H100, stored_explanation


POD_SET_FIELDS = ("name", "count", "gpus_per_pod")


def form(*, pod_sets=(("worker", 2, 8),), **overrides) -> dict:
    """The submit form as a browser posts it: the job's fields, and the pod-set rows (three, blanks ignored)."""
    data = {"name": "web-job", "queue": "vision-main", "flavor": H100,
            "priority_class": "", "topology_required": "block", "topology_preferred": "rack", "runtime_limit_s": 600,
            "checkpoint_interval_s": 60, "preemptible": "on",
            "pods-TOTAL_FORMS": 3, "pods-INITIAL_FORMS": 1, "pods-MIN_NUM_FORMS": 1, "pods-MAX_NUM_FORMS": 8}
    rows = [*pod_sets, *[("", "", "")] * (3 - len(pod_sets))]
    for i, row in enumerate(rows):
        data.update({f"pods-{i}-{field}": value for field, value in zip(POD_SET_FIELDS, row)})
    data.update(overrides)
    return data


@pytest.mark.parametrize("url", ["/", "/jobs/new/", "/fleet/", "/queues/", "/preemptions/"])
def test_pages_need_a_login(client, db, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_login_page_and_logging_in(client, org):
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "vision-researcher", "password": "gangway"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 302


def test_submit_through_the_form_then_see_it_in_the_list_and_detail(browser_as):
    client = browser_as("vision-researcher")
    page = client.get("/jobs/new/")
    assert b"vision-main" in page.content and b"language-main" not in page.content
    response = client.post("/jobs/new/", form())
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert b"web-job" in client.get("/").content
    reconcile_pass_run()
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "admitted" in detail and "gpu-r1-n1" in detail or "gpu-r2-n1" in detail


@pytest.mark.parametrize(
    "override, message",
    [
        ({"pods-0-gpus_per_pod": 16}, "the largest H100-80GB node has 8 allocatable"),
        ({"pods-0-count": 0}, "must be an integer &gt; 0"),
        ({"queue": "nope"}, "unknown queue"),
        ({"queue": "language-main"}, "only members of team language"),
        ({"topology_required": "rack", "topology_preferred": "block"}, "coarser than the required level"),
        ({"pods-0-count": 9}, "the whole fleet has 64 allocatable"),
        ({"pods-0-name": ""}, "This field is required"),
    ],
)
def test_the_form_shows_the_services_validation_messages_and_writes_nothing(browser_as, override, message):
    response = browser_as("vision-researcher").post("/jobs/new/", form(**override))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Job.objects.count() == 0


def test_a_gang_of_two_pod_sets_is_submitted_through_the_form(browser_as):
    response = browser_as("vision-researcher").post("/jobs/new/", form(pod_sets=[("worker", 2, 8), ("launcher", 1, 1)]))
    assert response.status_code == 302
    job = Job.objects.get()
    assert sorted(job.pod_sets.values_list("name", "count", "gpus_per_pod")) == [("launcher", 1, 1), ("worker", 2, 8)]


def test_an_error_in_the_second_pod_set_is_shown_on_its_row(browser_as):
    response = browser_as("vision-researcher").post("/jobs/new/", form(pod_sets=[("worker", 2, 8), ("launcher", 1, 16)]))
    assert response.status_code == 400
    assert 'name="pods-1-gpus_per_pod"' in response.content.decode().split("the largest H100-80GB node has 8 allocatable")[0]
    assert Job.objects.count() == 0


def test_a_pending_job_page_explains_why(browser_as):
    client = browser_as("vision-researcher")
    client.post("/jobs/new/", form(pod_sets=[("worker", 8, 8)]))
    client.post("/jobs/new/", form(name="second", pod_sets=[("worker", 1, 8)]))
    reconcile_pass_run()
    pending = Job.objects.get(state="pending")
    page = client.get(f"/jobs/{pending.pk}/").content.decode()
    assert "Why is it pending?" in page and stored_explanation(pending)["blocking"] in page


def test_cancel_from_the_detail_page(browser_as):
    client = browser_as("vision-researcher")
    client.post("/jobs/new/", form())
    job = Job.objects.get()
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 302
    job.refresh_from_db()
    assert job.state == "cancelled"


def test_other_teams_jobs_hide_name_and_owner(browser_as):
    browser_as("vision-researcher").post("/jobs/new/", form(name="secret-run"))
    page = browser_as("language-researcher").get("/").content.decode()
    assert "secret-run" not in page and "(private)" in page


def test_the_fleet_page_lists_racks_and_loads_plotly_from_our_static_files(browser_as):
    page = browser_as("vision-researcher").get("/fleet/").content.decode()
    assert "b1-r01" in page and "b1-r02" in page and "whole free nodes" in page
    assert f'/static/{vendored_path("plotly")}' in page
    # Nothing loads from another host (a bare "cdn" search failed whenever the random CSRF token held those letters).
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', page)
    assert f'/static/{vendored_path("htmx")}' in page
    assert 'id="rack-heatmap-data"' in page


def test_the_fleet_page_says_which_policy_is_in_force(browser_as, settings):
    settings.GANGWAY_SCHEDULER = {"payoff_margin": 5.0}
    page = browser_as("vision-researcher").get("/fleet/").content.decode()
    rules = page[page.index('id="policy-rules"'):]
    assert "<dt>Fair share</dt>" in rules and "per weight × nominal GPUs" in rules
    assert "never for attained service alone" in rules and "exceed 5× the victims" in rules
    assert "best-fitting node of the whole fleet" in rules


@pytest.mark.parametrize("name, marker", [("plotly", b"plotly"), ("htmx", b"htmx")])
def test_vendored_javascript_is_served_by_us_compressed_and_cached_for_a_year(client, db, name, marker):
    response = client.get(f"/static/{vendored_path(name)}", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    if response.get("Content-Encoding") == "gzip":
        body = __import__("gzip").decompress(body)
    assert marker in body[:200_000].lower()
    assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]


@pytest.mark.parametrize("path", ["vendor/plotly-0.0.0.min.js", "css/missing.css"])
def test_a_static_file_that_does_not_exist_is_a_404_not_a_500(client, db, path):
    assert client.get(f"/static/{path}").status_code == 404


def test_the_favicon_is_ours(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    assert client.get(response["Location"]).status_code == 200


def test_a_lead_edits_a_quota_on_the_queues_page(browser_as):
    client = browser_as("vision-lead")
    page = client.get("/queues/").content.decode()
    assert f'href="/queues/vision-main/quotas/{H100}/"' in page, "a link opens the form"
    assert 'name="nominal"' not in page, "no form rendered up front"
    assert 'name="nominal"' in client.get(f"/queues/vision-main/quotas/{H100}/").content.decode(), "without JavaScript: its own page"
    client.post(f"/queues/vision-main/quotas/{H100}/", {"nominal": 16, "borrowing_limit": "", "lending_limit": ""})
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 16
    response = client.post(f"/queues/vision-main/quotas/{H100}/", {"nominal": 99}, follow=True)
    assert "its allotment is 32" in response.content.decode()
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 16


def field_error(page: str, field_id: str) -> str:
    """The error shown beside the field with this id ("" when none)."""
    found = re.search(rf'<span class="error" id="{field_id}_error">(.*?)</span>', page)
    return found.group(1) if found else ""


@pytest.mark.parametrize("name, body, field_id, message", [
    ("a nominal quota above the team's allotment", {"nominal": "99", "borrowing_limit": "", "lending_limit": ""},
     f"id_vision-main_{H100}_nominal", "its allotment is 32"),
    ("a borrowing limit larger than the whole fleet", {"nominal": "16", "borrowing_limit": "100000", "lending_limit": ""},
     f"id_vision-main_{H100}_borrowing_limit", "100,000 is more than the 64 H100-80GB GPUs in the whole fleet"),
    ("a lending limit above the nominal quota", {"nominal": "16", "borrowing_limit": "", "lending_limit": "20"},
     f"id_vision-main_{H100}_lending_limit", "20 exceeds the nominal quota 16"),
    ("a negative nominal quota", {"nominal": "-1", "borrowing_limit": "", "lending_limit": ""},
     f"id_vision-main_{H100}_nominal", "greater than or equal to 0"),
])
def test_a_refused_quota_change_shows_its_error_beside_the_field_with_the_typed_values_kept(browser_as, name, body, field_id, message):
    client = browser_as("vision-lead")
    for url in (f"/queues/vision-main/quotas/{H100}/", f"/queues/vision-main/quotas/{H100}/preview/"):
        response = client.post(url, body)
        page = response.content.decode()
        assert response.status_code == 400, name
        assert message in field_error(page, field_id), name
        for key, value in body.items():
            assert re.search(rf'name="{key}"[^>]*value="{value}"', page) or not value, f"{name}: {key} keeps {value!r}"
        assert 'aria-invalid="true"' in page and f'aria-describedby="{field_id}_error"' in page
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 32, "nothing saved"


def test_a_refused_allotment_shows_its_error_beside_the_field(browser_as):
    response = browser_as("admin").post(f"/teams/vision/allotments/{H100}/", {"gpus": "8"})
    assert response.status_code == 400
    assert "below the 32 GPUs" in field_error(response.content.decode(), f"id_vision_{H100}_gpus")
    assert re.search(r'name="gpus"[^>]*value="8"', response.content.decode())


def test_the_preview_page_saves_the_previewed_change(browser_as):
    client = browser_as("vision-lead")
    preview = client.post(f"/queues/vision-main/quotas/{H100}/preview/", {"nominal": "24", "borrowing_limit": "8", "lending_limit": ""})
    page = preview.content.decode()
    assert "Save this change" in page and f'action="/queues/vision-main/quotas/{H100}/"' in page
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 32
    client.post(f"/queues/vision-main/quotas/{H100}/", {"nominal": "24", "borrowing_limit": "8", "lending_limit": ""})
    assert QueueQuota.objects.filter(queue__name="vision-main").values_list("nominal", "borrowing_limit", "lending_limit").get() == (24, 8, None)


def test_zero_limits_read_as_zero_not_as_unlimited(browser_as):
    client = browser_as("vision-lead")
    client.post(f"/queues/vision-main/quotas/{H100}/", {"nominal": 16, "borrowing_limit": "0", "lending_limit": "0"})
    page = client.get("/queues/").content.decode()
    assert "16 · 0 · 0" in page and "16 · ∞" not in page


def test_an_admin_raises_an_allotment_on_the_queues_page_after_previewing_it(browser_as):
    client = browser_as("admin")
    assert f'href="/teams/vision/allotments/{H100}/"' in client.get("/queues/").content.decode()
    assert 'aria-label="allotment vision H100-80GB"' in client.get(f"/teams/vision/allotments/{H100}/").content.decode()
    preview = client.post(f"/teams/vision/allotments/{H100}/preview/", {"gpus": 48})
    assert preview.status_code == 200 and "Preview: team vision, H100-80GB" in preview.content.decode()
    assert TeamAllotment.objects.get(team__name="vision").gpus == 32, "a preview saves nothing"
    client.post(f"/teams/vision/allotments/{H100}/", {"gpus": 48})
    assert TeamAllotment.objects.get(team__name="vision").gpus == 48
    response = client.post(f"/teams/vision/allotments/{H100}/", {"gpus": 8}, follow=True)
    assert "below the 32 GPUs the team&#x27;s queues hold as nominal quota" in response.content.decode()
    assert TeamAllotment.objects.get(team__name="vision").gpus == 48
    assert client.post(f"/teams/nope/allotments/{H100}/", {"gpus": 1}).status_code == 404


def test_a_lead_sees_allotments_but_cannot_change_them(browser_as):
    client = browser_as("vision-lead")
    page = client.get("/queues/").content.decode()
    assert "Team allotments" in page and f'href="/teams/vision/allotments/{H100}/"' not in page
    assert client.get(f"/teams/vision/allotments/{H100}/").status_code == 403
    response = client.post(f"/teams/vision/allotments/{H100}/", {"gpus": 64}, follow=True)
    assert "only admins change allotments" in response.content.decode()
    assert TeamAllotment.objects.get(team__name="vision").gpus == 32


def test_a_researcher_cannot_edit_quotas_on_the_queues_page(browser_as):
    client = browser_as("vision-researcher")
    assert f'href="/queues/vision-main/quotas/{H100}/"' not in client.get("/queues/").content.decode()
    assert client.get(f"/queues/vision-main/quotas/{H100}/").status_code == 403
    client.post(f"/queues/vision-main/quotas/{H100}/", {"nominal": 1})
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 32


def test_an_admin_approves_a_plan_on_the_preemptions_page(browser_as, org):
    from tests.api.test_endpoints import _plan

    plan = _plan(org)
    client = browser_as("admin")
    assert b"Approve" in client.get("/preemptions/").content
    client.post(f"/preemptions/{plan.pk}/approve/")
    plan.refresh_from_db()
    assert plan.status == "approved" and plan.decided_by == org["admin"]
    assert b"Approve" not in browser_as("vision-lead").get("/preemptions/").content


def test_the_fleet_heatmap_has_a_cell_per_node_and_greys_out_unavailable_ones(fleet):
    from scheduling.models import Node
    from scheduling.selectors import fleet_summary

    Node.objects.filter(name="gpu-r1-n1").update(is_unschedulable=True)
    Node.objects.filter(name="gpu-r2-n2").update(allocatable_gpus=6)
    heatmap = fleet_summary().heatmap
    assert len(heatmap["y"]) == 2 and len(heatmap["x"]) == 4
    rack1, rack2 = heatmap["z"]
    assert rack1 == [-1, 8, 8, 8]
    assert rack2 == [8, 6, 8, 8]
    assert "2 unhealthy GPUs" in heatmap["text"][1][1]


def test_the_job_list_opens_on_what_needs_attention_borrowing_idle_allocations_and_waiting_plans(browser_as, org, settings):
    from tests.api.test_endpoints import _plan
    from tests.web.test_team_page import borrow_and_collect

    settings.GANGWAY_IDLE_GRACE_S = 240  # four of the five collected minutes: a slow machine still finds them
    job = borrow_and_collect(org, minutes=5, util_percent=4.0)
    _plan(org)
    member = browser_as("vision-researcher").get("/").content.decode()
    overview = member.split('class="overview"')[1].split("</section>")[0]
    assert "team vision · H100-80GB: 48 of 32 GPUs held, 16 borrowed from the cohort" in overview
    assert "1 idle allocation holding 48 GPUs" in overview and "waiting for your decision" not in overview
    assert f'href="/jobs/{job.pk}/#idle-flag"' in member, "the idle job is tagged in the list"
    admin = browser_as("admin").get("/").content.decode().split('class="overview"')[1].split("</section>")[0]
    assert "borrowing beyond their allotment" in admin and "1 preemption plan waiting for your decision" in admin
