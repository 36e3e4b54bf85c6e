"""The audit page and the job page's audit log; who acted on another team's job is hidden on the page and in the API."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from scheduling.models import AuditRecord, PlanStatus, PreemptionPlan
from scheduling.services import job_cancel, job_submit, queue_update, team_update
from tests.conftest import H100


def api_as(org, username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(org[username])
    return client


@pytest.fixture
def cancelled_by_lead(org):
    """vision-researcher's job, cancelled by vision-lead: its events name both."""
    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="secret-run",
                     pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}])
    job_cancel(user=org["vision-lead"], job_id=job.pk, reason="wrong dataset")
    return job


@pytest.mark.parametrize("viewer", ["language-researcher", "language-lead", "outsider"])
def test_who_acted_on_another_teams_job_appears_nowhere_on_its_page_or_in_the_api(org, browser_as, cancelled_by_lead, viewer):
    page = browser_as(viewer).get(f"/jobs/{cancelled_by_lead.pk}/").content.decode()
    body = json.dumps(api_as(org, viewer).get(f"/api/v1/jobs/{cancelled_by_lead.pk}/").json())
    for private in ("vision-lead", "vision-researcher", "secret-run"):
        assert private not in page and private not in body
    assert page.count("(private)") >= 3, "the owner and both events' actors"
    events = api_as(org, viewer).get(f"/api/v1/jobs/{cancelled_by_lead.pk}/").json()["events"]
    assert [e["actor"] for e in events] == [None, None]


@pytest.mark.parametrize("viewer", ["vision-researcher", "vision-lead", "admin"])
def test_the_jobs_own_team_and_admins_see_who_acted(org, browser_as, cancelled_by_lead, viewer):
    page = browser_as(viewer).get(f"/jobs/{cancelled_by_lead.pk}/").content.decode()
    events = api_as(org, viewer).get(f"/api/v1/jobs/{cancelled_by_lead.pk}/").json()["events"]
    assert [e["actor"] for e in events] == ["vision-researcher", "vision-lead"]
    assert "vision-lead" in page


@pytest.mark.parametrize("viewer, shows_audit", [("vision-lead", True), ("admin", True), ("vision-researcher", False), ("language-lead", False)])
def test_the_job_page_shows_its_audit_records_to_admins_and_its_teams_leads(browser_as, cancelled_by_lead, viewer, shows_audit):
    page = browser_as(viewer).get(f"/jobs/{cancelled_by_lead.pk}/").content.decode()
    assert ("job.cancel" in page and "wrong dataset" in page) is shows_audit


@pytest.fixture
def history(org):
    team_update(actor=org["admin"], team_name="vision", allotments={H100: 40})
    queue_update(actor=org["language-lead"], queue_name="language-main", weight=2.0)


@pytest.mark.parametrize("viewer, status", [("admin", 200), ("vision-lead", 200), ("vision-researcher", 403), ("outsider", 403)])
def test_who_opens_the_audit_page(browser_as, history, viewer, status):
    assert browser_as(viewer).get("/audit/").status_code == status


def test_the_audit_page_lists_every_change_for_admins_and_filters_it(browser_as, history):
    client = browser_as("admin")
    page = client.get("/audit/").content.decode()
    assert "team.allotment_update" in page and "queue.settings_update" in page and "language-lead" in page
    filtered = client.get("/audit/?action=queue.settings_update").content.decode()
    assert 'id="audit-' in filtered and "team.allotment_update</code>" not in filtered
    by_actor = client.get("/audit/?actor=admin").content.decode()
    assert "queue.settings_update</code>" not in by_actor


def test_a_lead_sees_only_their_teams_records_on_the_audit_page(browser_as, history):
    page = browser_as("vision-lead").get("/audit/").content.decode()
    assert "team.allotment_update</code>" in page and "queue.settings_update</code>" not in page


def test_the_audit_page_pages_back_by_id(org, browser_as):
    for gpus in range(33, 33 + 53):
        team_update(actor=org["admin"], team_name="vision", allotments={H100: gpus})
    client = browser_as("admin")
    first = client.get("/audit/")
    older = first.context["older_query"]
    second = client.get(f"/audit/?{older}")
    shown = [r.pk for r in first.context["records"]] + [r.pk for r in second.context["records"]]
    assert shown == list(AuditRecord.objects.order_by("-id").values_list("pk", flat=True))
    assert second.context["next_before"] is None


def test_an_admin_rejects_a_plan_with_a_comment_from_the_page(org, browser_as, cancelled_by_lead):
    plan = PreemptionPlan.objects.create(job=cancelled_by_lead, reason="quota", needs_approval=True)
    browser_as("admin").post(f"/preemptions/{plan.pk}/reject/", {"comment": "  not now  "})
    plan.refresh_from_db()
    assert plan.status == PlanStatus.REJECTED
    assert AuditRecord.objects.get(action="preemption.reject").comment == "not now"


@pytest.fixture
def classes(org):
    from scheduling.services import priority_class_create

    priority_class_create(actor=org["admin"], name="normal", value=0, is_default=True)
    priority_class_create(actor=org["admin"], name="high", value=10, max_gpus_per_team=8)
    priority_class_create(actor=org["admin"], name="urgent", value=50, teams=["language"])


def test_the_submit_form_offers_a_researcher_the_teams_classes_and_no_raw_priority(browser_as, classes):
    page = browser_as("vision-researcher").get("/jobs/new/").content.decode()
    assert 'name="priority_class"' in page and 'name="priority"' not in page
    assert 'value="high"' in page and "≤ 8 GPUs per team" in page and 'value="urgent"' not in page
    admin_page = browser_as("admin").get("/jobs/new/").content.decode()
    assert 'name="priority"' in admin_page and 'value="urgent"' in admin_page


def test_a_gang_over_the_classs_cap_is_refused_on_the_form_next_to_the_class(browser_as, classes):
    from tests.web.test_pages import form

    response = browser_as("vision-researcher").post("/jobs/new/", form(priority_class="high"))
    assert response.status_code == 400
    assert response.context["form"].errors["priority_class"] == ["the gang needs 16 GPUs; a team may run at most 8 at high"]


@pytest.mark.parametrize("name, before, after, lines", [
    ("a quota edit shows only the limit that changed", {"quotas.H100": {"nominal": 32, "lending_limit": None}},
     {"quotas.H100": {"nominal": 24, "lending_limit": None}}, [("quotas.H100.nominal", "32", "24")]),
    ("a creation has no before", {}, {"value": 10, "teams": ["vision", "language"]},
     [("value", None, "10"), ("teams", None, "vision, language")]),
    ("an allotment set to nothing reads as removed", {"H100": 64}, {}, [("H100", "64", "removed")]),
    ("a limit cleared reads as none", {"borrowing_limit": 8}, {"borrowing_limit": None}, [("borrowing_limit", "8", "none")]),
    ("a flag reads as yes or no", {"is_default": False}, {"is_default": True}, [("is_default", "no", "yes")]),
])
def test_an_audit_record_reads_as_what_changed_from_what_to_what(name, before, after, lines):
    from types import SimpleNamespace

    from portal.templatetags.gangway import audit_changes

    assert audit_changes(SimpleNamespace(before=before, after=after)) == lines, name
