"""Explanations through the product: the reconcile pass stores them, estimates are kept, the API, `why`, the job page
and the what-if previews (which save nothing and follow the PATCH permissions)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.models import Job, JobEvent, PreemptionPlan, Queue, QueueQuota, TeamAllotment
from scheduling.services import reconcile_pass_run, job_submit
from scheduling.selectors.explanations import job_explanation_get
from scheduling.services.explanations import estimates_refresh
from tests.conftest import H100, stored_explanation

T0 = 1_800_000_000.0


def submit(org, *, user="vision-researcher", queue="vision-main", count=1, at=T0, limit_s=3600, name=None):
    return job_submit(
        user=org[user], queue_name=queue, flavor_name=H100, name=name or f"job-{count}x8",
        pod_sets=[{"name": "worker", "count": count, "gpus_per_pod": 8}], runtime_limit_s=limit_s,
        checkpoint_interval_s=300, now=at,
    )


@pytest.fixture
def busy(org):
    """vision fills its 32 GPUs with 4 one-node jobs; then a 4-node gang and a one-node job wait on quota
    (language lends nothing)."""
    QueueQuota.objects.filter(queue__name="language-main").update(lending_limit=0)
    for i in range(4):
        submit(org, at=T0 + i, name=f"running-{i}")
    reconcile_pass_run(now=T0 + 10)
    gang = submit(org, count=4, at=T0 + 20, name="big-gang")
    small = submit(org, count=1, at=T0 + 21, name="small")
    reconcile_pass_run(now=T0 + 30)
    return {"gang": Job.objects.get(pk=gang.pk), "small": Job.objects.get(pk=small.pk)}


def test_the_pass_stores_the_ordered_explanation_and_an_estimate_survives_the_next_pass(busy, org):
    gang = busy["gang"]
    e = stored_explanation(gang)
    assert e["blocking"] == "quota" and e["quota"]["requested"] == 32 and e["quota"]["in_use"] == 32
    assert {"fit", "nodes", "health", "fixes"} <= set(e) and e["fixes"][0]["action"] == "wait"
    summary = estimates_refresh(now=T0 + 40)
    assert summary["jobs"] == 2 and summary["within_horizon"] == 2
    gang.refresh_from_db()
    assert stored_explanation(gang)["estimated_start"] and stored_explanation(gang)["estimated_at"]
    reconcile_pass_run(now=T0 + 50)
    gang.refresh_from_db()
    assert stored_explanation(gang)["estimated_start"]  # a pass keeps the estimate beside the refreshed explanation


def test_the_api_gives_the_whole_stored_explanation_in_the_shape_the_schema_declares(busy, client_as):
    estimates_refresh(now=T0 + 40)
    client = client_as("vision-researcher")
    for job in (busy["gang"], busy["small"]):
        job.refresh_from_db()
        stored = job_explanation_get(job=job)
        assert client.get(f"/api/v1/jobs/{job.pk}/").json()["explanation"] == json.loads(json.dumps(stored))
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    explanation = schema["components"]["schemas"]["JobDetailOut"]["properties"]["explanation"]
    assert "ExplanationOut" in json.dumps(explanation)
    assert {"blocking", "quota", "fit", "fixes", "position", "estimated_start"} <= set(schema["components"]["schemas"]["ExplanationOut"]["properties"])


def test_the_api_returns_the_explanation_with_the_live_queue_position(busy, client_as):
    detail = client_as("vision-researcher").get(f"/api/v1/jobs/{busy['small'].pk}/").json()
    e = detail["explanation"]
    assert e["blocking"] == "quota"
    assert e["position"]["in_queue"] == 2 and e["position"]["ahead"][0]["id"] == busy["gang"].pk
    assert e["position"]["gpus_ahead"] == 32
    assert "fingerprint" not in e


def test_why_prints_the_blocking_level_first_then_the_levels_then_the_fixes(busy):
    out = StringIO()
    call_command("why", busy["gang"].pk, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"Job #{busy['gang'].pk} big-gang — 32 H100-80GB GPUs in queue vision-main")
    assert lines[1].startswith("BLOCKED BY QUOTA: needs 32 H100-80GB GPUs")
    levels, fixes = lines.index("Levels:"), next(i for i, l in enumerate(lines) if l.startswith("Fixes"))
    assert levels < fixes
    assert lines[levels + 1].startswith("  ✗ quota:")
    assert lines[fixes + 1].startswith("  1. wait: 0.0 GPU-hours, paid by nobody")


def test_why_an_unknown_job_is_a_clear_error(db):
    with pytest.raises(CommandError, match="no job with id 999"):
        call_command("why", 999)


def test_the_job_page_shows_the_blocking_level_first(busy, client, org):
    client.force_login(org["vision-researcher"])
    page = client.get(f"/jobs/{busy['gang'].pk}/").content.decode()
    why = page.index("Why is it pending?")
    blocking = page.index('data-level="quota"')
    assert why < blocking < page.index('id="level-quota"') < page.index('id="level-fit"') < page.index("Fixes, cheapest")
    assert 'class="level blocking" id="level-quota"' in page
    assert "Who pays" in page and "Estimated start" in page


def _state():
    return (
        list(QueueQuota.objects.order_by("pk").values_list("queue__name", "nominal", "borrowing_limit", "lending_limit")),
        list(Queue.objects.order_by("pk").values_list("name", "weight", "strategy", "cohort_id")),
        list(TeamAllotment.objects.order_by("pk").values_list("team__name", "gpus")),
        list(Job.objects.order_by("pk").values_list("id", "state", "explanation_key")),
        JobEvent.objects.count(),
        PreemptionPlan.objects.count(),
    )


def test_a_queue_preview_saves_nothing_and_shows_waits_before_and_after(busy, client_as, org):
    TeamAllotment.objects.filter(team__name="vision").update(gpus=64)
    before = _state()
    response = client_as("vision-lead").post(
        "/api/v1/queues/vision-main/preview", {"quotas": {H100: {"nominal": 64}}}, format="json"
    )
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["saved"] is False and data["queue"] == "vision-main"
    assert data["proposed"]["vision-main"]["quotas"][H100]["nominal"] == 64
    jobs = {j["id"]: j for j in data["jobs"]}
    assert set(jobs) == {busy["gang"].pk, busy["small"].pk}
    small = jobs[busy["small"].pk]
    assert small["estimated_start_after"] is not None and small["wait_after_s"] <= (small["wait_before_s"] or float("inf"))
    assert {row["team"] for row in data["teams"]} == {"vision"}
    assert _state() == before


@pytest.mark.parametrize("user, status", [("vision-researcher", 403), ("language-lead", 403), ("outsider", 403),
                                          ("vision-lead", 200), ("admin", 200)])
def test_a_queue_preview_follows_the_patch_permissions(busy, client_as, user, status):
    before = _state()
    response = client_as(user).post("/api/v1/queues/vision-main/preview/", {"quotas": {H100: {"nominal": 16}}}, format="json")
    assert response.status_code == status
    assert _state() == before


def test_a_queue_preview_validates_like_the_patch(busy, client_as):
    response = client_as("vision-lead").post("/api/v1/queues/vision-main/preview", {"quotas": {H100: {"nominal": 999}}}, format="json")
    assert response.status_code == 400 and "allotment" in str(response.json())
    assert client_as("vision-lead").post("/api/v1/queues/nope/preview", {}, format="json").status_code == 404


@pytest.mark.parametrize("user, status", [("vision-lead", 403), ("admin", 200)])
def test_only_admins_preview_an_allotment(busy, client_as, user, status):
    before = _state()
    response = client_as(user).post("/api/v1/teams/vision/preview", {"allotments": {H100: 64}}, format="json")
    assert response.status_code == status
    if status == 200:
        data = response.json()
        assert data["proposed"]["vision-main"]["quotas"][H100]["nominal"] == 64 and "assumption" in data
    assert _state() == before


def test_the_queue_page_previews_a_quota_without_saving(busy, client, org):
    client.force_login(org["vision-lead"])
    assert "Preview" in client.get(f"/queues/vision-main/quotas/{H100}/").content.decode()  # the form, opened from the queues page
    before = _state()
    page = client.post(f"/queues/vision-main/quotas/{H100}/preview/", {"nominal": 16, "borrowing_limit": "", "lending_limit": ""})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Nothing is saved" in text and "Mean predicted wait per team" in text and f"#{busy['gang'].pk}" in text
    assert _state() == before
