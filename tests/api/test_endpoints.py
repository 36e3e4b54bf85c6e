"""Every endpoint's happy path."""

from __future__ import annotations

import re

from scheduling.models import Flavor, Job, PlanStatus, PreemptionPlan, PreemptionVictim, Queue, Team
from scheduling.services import reconcile_pass_run
from tests.conftest import H100, job_body


def test_submit_a_job_and_read_it_back_with_placement_after_a_pass(client_as):
    client = client_as("vision-researcher")
    response = client.post("/api/v1/jobs/", job_body(), format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    assert response.json()["state"] == "pending"
    reconcile_pass_run()
    detail = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert detail["state"] == "admitted"
    assert detail["name"] == "llama-pretrain" and detail["owner"] == "vision-researcher"
    assert sorted((p["pod_set"], p["index"]) for p in detail["placement"]) == [("worker", 0), ("worker", 1)]
    assert detail["explanation"] is None
    assert [e["to_state"] for e in detail["events"]] == ["pending", "admitted"]


def test_a_pending_job_carries_its_explanation(client_as):
    client = client_as("vision-researcher")
    client_as("language-researcher").post(
        "/api/v1/jobs/", job_body(queue="language-main", pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}]), format="json"
    )
    reconcile_pass_run()
    job_id = client.post("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": 8, "gpus_per_pod": 8}]), format="json").json()["id"]
    reconcile_pass_run()
    detail = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert detail["state"] == "pending"
    assert detail["explanation"]["blocking"] in {"quota", "fit"}
    assert detail["explanation"]["summary"]


def test_list_jobs_with_filters(client_as):
    vision, language = client_as("vision-researcher"), client_as("language-researcher")
    vision.post("/api/v1/jobs/", job_body(name="a"), format="json")
    language.post("/api/v1/jobs/", job_body(name="b", queue="language-main"), format="json")
    assert len(vision.get("/api/v1/jobs/").json()["results"]) == 2
    assert [j["queue"] for j in vision.get("/api/v1/jobs/?queue=language-main").json()["results"]] == ["language-main"]
    assert [j["team"] for j in vision.get("/api/v1/jobs/?team=vision").json()["results"]] == ["vision"]
    assert vision.get("/api/v1/jobs/?state=running").json()["results"] == []
    assert len(vision.get("/api/v1/jobs/?owner=vision-researcher").json()["results"]) == 1
    assert vision.get("/api/v1/jobs/?state=bogus").status_code == 400


def test_cancel_a_job(client_as):
    client = client_as("vision-researcher")
    job_id = client.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    response = client.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert client.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 400


def test_teams_list_create_detail_patch(client_as):
    admin = client_as("admin")
    assert [t["name"] for t in admin.get("/api/v1/teams/").json()] == ["language", "vision"]
    response = admin.post("/api/v1/teams/", {"name": "speech", "allotments": {H100: 16}}, format="json")
    assert response.status_code == 201 and response.json() == {"name": "speech", "allotments": {H100: 16}, "queues": [], "namespaces": []}
    assert admin.get("/api/v1/teams/speech/").json()["allotments"] == {H100: 16}
    response = admin.patch("/api/v1/teams/vision/", {"allotments": {H100: 48}}, format="json")
    assert response.status_code == 200 and response.json()["allotments"] == {H100: 48}
    assert admin.get("/api/v1/teams/nope/").status_code == 404


def test_queues_list_create_detail_patch(client_as):
    lead = client_as("vision-lead")
    body = {"name": "vision-main", "team": "vision", "cohort": "shared", "weight": 1,
            "quotas": {H100: {"nominal": 16, "borrowing_limit": None, "lending_limit": None}}}
    response = lead.patch("/api/v1/queues/vision-main/", {"quotas": {H100: {"nominal": 16}}}, format="json")
    assert response.status_code == 200 and response.json()["quotas"][H100]["nominal"] == 16
    body.update(name="vision-batch", cohort=None)
    response = lead.post("/api/v1/queues/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["quotas"] == {H100: {"nominal": 16, "borrowing_limit": None, "lending_limit": None}}
    response = client_as("admin").patch("/api/v1/queues/vision-batch/", {"cohort": "shared"}, format="json")
    assert response.json()["cohort"] == "shared"
    names = [q["name"] for q in lead.get("/api/v1/queues/").json()]
    assert names == ["language-main", "vision-batch", "vision-main"]
    detail = lead.get("/api/v1/queues/vision-batch/").json()
    assert detail["team"] == "vision" and detail["gpus_in_use"] == {}
    response = lead.patch("/api/v1/queues/vision-batch/", {"weight": 2.5, "strategy": "strict_fifo"}, format="json")
    assert response.json()["weight"] == 2.5 and response.json()["strategy"] == "strict_fifo"


def test_nodes_and_fleet_totals(client_as):
    client = client_as("vision-researcher")
    client.post("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": 2, "gpus_per_pod": 4}]), format="json")
    reconcile_pass_run()
    nodes = client.get("/api/v1/nodes/").json()["results"]
    assert len(nodes) == 8 and sum(n["allocated_gpus"] for n in nodes) == 8
    fleet = client.get("/api/v1/fleet/").json()
    assert fleet["topology"] == ["block", "rack"]
    totals = fleet["totals"]
    assert (totals["capacity_gpus"], totals["allocated_gpus"], totals["free_gpus"]) == (64, 8, 56)
    assert totals["whole_free_nodes"] in (6, 7)
    assert sorted(r["name"] for r in fleet["racks"]) == ["b1-r01", "b1-r02"]
    assert sum(r["free_gpus"] for r in fleet["racks"]) == 56
    assert fleet["policy"]["order"].startswith("least attained service first")
    assert fleet["policy"]["preemption"].startswith("only when it pays")


def _plan(org) -> PreemptionPlan:
    flavor_id = Flavor.objects.get(name=H100).pk
    victim = Job.objects.create(
        owner=org["language-researcher"], queue=Queue.objects.get(name="language-main"), name="v", flavor_id=flavor_id,
        gpus=8, submitted_at="2026-01-01T00:00:00Z", state="running",
    )
    job = Job.objects.create(
        owner=org["vision-researcher"], queue=Queue.objects.get(name="vision-main"), name="j", flavor_id=flavor_id,
        gpus=8, submitted_at="2026-01-01T00:00:00Z",
    )
    plan = PreemptionPlan.objects.create(job=job, reason="quota", cost_gpu_hours=1.5, teams_affected=["language"], needs_approval=True)
    PreemptionVictim.objects.create(plan=plan, job=victim, gpus=8, cost_gpu_hours=1.5)
    return plan


def test_preemptions_list_approve_reject(client_as, org):
    admin = client_as("admin")
    plan = _plan(org)
    listed = admin.get("/api/v1/preemptions/").json()["results"]
    assert [p["id"] for p in listed] == [plan.pk] and listed[0]["victims"][0]["gpus"] == 8
    response = admin.post(f"/api/v1/preemptions/{plan.pk}/approve/")
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert response.json()["decided_by"] == "admin"
    assert admin.post(f"/api/v1/preemptions/{plan.pk}/reject/").status_code == 400  # decided already
    plan.status = PlanStatus.PROPOSED
    plan.save()
    assert admin.post(f"/api/v1/preemptions/{plan.pk}/reject/").json()["status"] == "rejected"


def test_schema_and_docs_are_served_without_a_cdn(client_as):
    client = client_as("vision-researcher")
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/jobs/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "/static/drf_spectacular_sidecar/" in html
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', html), "nothing loads from another host"
    assert Team.objects.count() == 2
