"""Permission rules, the same for the API and the web pages (scheduling.permissions)."""

from __future__ import annotations

import pytest

from scheduling.models import Job, QueueQuota, Team
from tests.conftest import H100, job_body


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/teams/", "/api/v1/queues/", "/api/v1/nodes/", "/api/v1/fleet/", "/api/v1/preemptions/"])
def test_anonymous_users_are_refused(client_as, url):
    assert client_as(None).get(url).status_code in (401, 403)


def test_anonymous_users_cannot_submit(client_as):
    assert client_as(None).post("/api/v1/jobs/", job_body(), format="json").status_code in (401, 403)
    assert Job.objects.count() == 0


@pytest.mark.parametrize("user", ["language-researcher", "language-lead", "outsider"])
def test_only_members_submit_into_a_teams_queue(client_as, user):
    response = client_as(user).post("/api/v1/jobs/", job_body(queue="vision-main"), format="json")
    assert response.status_code == 403
    assert Job.objects.count() == 0


@pytest.mark.parametrize("user", ["vision-researcher", "vision-lead", "admin"])
def test_members_and_admins_submit(client_as, user):
    assert client_as(user).post("/api/v1/jobs/", job_body(queue="vision-main"), format="json").status_code == 201


def test_researchers_of_another_team_see_jobs_without_private_fields(client_as):
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(name="secret-run"), format="json").json()["id"]
    for user in ("language-researcher", "outsider"):
        seen = client_as(user).get(f"/api/v1/jobs/{job_id}/").json()
        assert seen["name"] is None and seen["owner"] is None and seen["is_visible_in_full"] is False
        assert seen["state"] == "pending" and seen["gpus"] == 16
        listed = client_as(user).get("/api/v1/jobs/").json()["results"]
        assert [(j["name"], j["owner"]) for j in listed] == [(None, None)]
        assert client_as(user).get("/api/v1/jobs/?owner=vision-researcher").json()["results"] == []
    for user in ("vision-lead", "admin"):
        seen = client_as(user).get(f"/api/v1/jobs/{job_id}/").json()
        assert (seen["name"], seen["owner"]) == ("secret-run", "vision-researcher")


@pytest.mark.parametrize("user, status", [("language-researcher", 403), ("vision-lead", 200), ("admin", 200), ("vision-researcher", 200)])
def test_who_cancels_a_job(client_as, user, status):
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    assert client_as(user).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == status


@pytest.mark.parametrize("user, status", [("vision-researcher", 403), ("language-lead", 403), ("outsider", 403), ("vision-lead", 200), ("admin", 200)])
def test_only_the_teams_lead_or_an_admin_edits_its_quotas(client_as, user, status):
    response = client_as(user).patch("/api/v1/queues/vision-main/", {"quotas": {H100: {"nominal": 8}}}, format="json")
    assert response.status_code == status
    expected = 8 if status == 200 else 32
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == expected


@pytest.mark.parametrize("user, status", [("vision-researcher", 403), ("language-lead", 403), ("vision-lead", 201)])
def test_only_the_teams_lead_or_an_admin_creates_its_queues(client_as, user, status):
    body = {"name": "vision-batch", "team": "vision", "quotas": {}}
    assert client_as(user).post("/api/v1/queues/", body, format="json").status_code == status


@pytest.mark.parametrize("user", ["vision-lead", "vision-researcher", "outsider"])
def test_only_admins_create_teams_and_change_allotments(client_as, user):
    client = client_as(user)
    assert client.post("/api/v1/teams/", {"name": "speech"}, format="json").status_code == 403
    assert client.patch("/api/v1/teams/vision/", {"allotments": {H100: 64}}, format="json").status_code == 403
    assert Team.objects.count() == 2


@pytest.mark.parametrize("user", ["vision-lead", "language-researcher"])
def test_only_admins_decide_preemptions(client_as, org, user):
    from tests.api.test_endpoints import _plan

    plan = _plan(org)
    assert client_as(user).post(f"/api/v1/preemptions/{plan.pk}/approve/").status_code == 403
    assert client_as(user).post(f"/api/v1/preemptions/{plan.pk}/reject/").status_code == 403
    plan.refresh_from_db()
    assert plan.status == "proposed"
