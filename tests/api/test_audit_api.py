"""GET /api/v1/audit/: admins read every record, leads their teams', nobody else; newest first, paged by id."""

from __future__ import annotations

import pytest

from scheduling.models import AuditRecord, PlanStatus, PreemptionPlan
from scheduling.services import queue_update, team_update
from tests.conftest import H100, job_body


@pytest.fixture
def history(org):
    """Three allotment edits of vision, two quota edits of language's queue."""
    for gpus in (33, 34, 35):
        team_update(actor=org["admin"], team_name="vision", allotments={H100: gpus})
    for nominal in (30, 31):
        queue_update(actor=org["language-lead"], queue_name="language-main", quotas={H100: {"nominal": nominal}})


def seen(client, query: str = "") -> list[tuple[str, str]]:
    response = client.get(f"/api/v1/audit/{query}")
    assert response.status_code == 200, response.json()
    return [(r["action"], r["team"]) for r in response.json()["results"]]


@pytest.mark.parametrize("user, status", [("admin", 200), ("vision-lead", 200), ("vision-researcher", 403), ("outsider", 403), (None, 403)])
def test_who_reads_the_audit_log(client_as, history, user, status):
    assert client_as(user).get("/api/v1/audit/").status_code == status


def test_admins_read_every_record_newest_first(client_as, history):
    assert seen(client_as("admin")) == [("queue.quota_update", "language")] * 2 + [("team.allotment_update", "vision")] * 3


def test_leads_read_only_their_teams_records(client_as, history):
    assert seen(client_as("vision-lead")) == [("team.allotment_update", "vision")] * 3
    assert seen(client_as("vision-lead"), "?team=language") == []


@pytest.mark.parametrize("query, expected", [
    ("?team=vision", 3), ("?action=queue.quota_update", 2), ("?actor=language-lead", 2), ("?actor=nobody", 0),
    ("?target_type=queue&target_id=language-main", 2),
])
def test_filters(client_as, history, query, expected):
    assert len(seen(client_as("admin"), query)) == expected


def test_pages_go_back_by_id_without_gaps_or_repeats(client_as, history):
    client = client_as("admin")
    first = client.get("/api/v1/audit/?limit=2").json()
    second = client.get(f"/api/v1/audit/?limit=2&before={first['next_before']}").json()
    third = client.get(f"/api/v1/audit/?limit=2&before={second['next_before']}").json()
    ids = [r["id"] for page in (first, second, third) for r in page["results"]]
    assert ids == list(AuditRecord.objects.order_by("-id").values_list("id", flat=True))
    assert third["next_before"] is None


@pytest.mark.parametrize("query, field", [("?limit=0", "limit"), ("?limit=201", "limit"), ("?before=x", "before"), ("?action=drop", "action")])
def test_bad_queries_are_400s_naming_the_parameter(client_as, history, query, field):
    response = client_as("admin").get(f"/api/v1/audit/{query}")
    assert response.status_code == 400 and field in response.json()


def test_a_record_shows_before_and_after(client_as, history):
    record = client_as("admin").get("/api/v1/audit/?limit=1").json()["results"][0]
    quota = {"borrowing_limit": None, "lending_limit": None}
    assert (record["actor"], record["target_type"], record["target_id"]) == ("language-lead", "queue", "language-main")
    assert record["before"] == {f"quotas.{H100}": {"nominal": 30, **quota}}
    assert record["after"] == {f"quotas.{H100}": {"nominal": 31, **quota}}


@pytest.mark.parametrize("decision, status", [("approve", PlanStatus.APPROVED), ("reject", PlanStatus.REJECTED)])
def test_a_decision_takes_an_optional_comment_into_the_log(client_as, decision, status):
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    plan = PreemptionPlan.objects.create(job_id=job_id, reason="quota", needs_approval=True)
    response = client_as("admin").post(f"/api/v1/preemptions/{plan.pk}/{decision}/", {"comment": "paper deadline"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == status
    record = AuditRecord.objects.get(target_type="preemptionplan")
    assert (record.action, record.comment, record.actor_name) == (f"preemption.{decision}", "paper deadline", "admin")


def test_a_decision_with_an_unknown_field_is_refused_and_not_taken(client_as):
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    plan = PreemptionPlan.objects.create(job_id=job_id, reason="quota", needs_approval=True)
    response = client_as("admin").post(f"/api/v1/preemptions/{plan.pk}/approve/", {"note": "x"}, format="json")
    assert response.status_code == 400 and "note" in response.json()
    plan.refresh_from_db()
    assert plan.status == PlanStatus.PROPOSED and not AuditRecord.objects.exists()


@pytest.mark.parametrize("user, status", [("admin", 200), ("vision-lead", 403), ("vision-researcher", 403)])
def test_only_admins_cordon_a_node_and_the_cordon_is_audited(client_as, user, status):
    response = client_as(user).post("/api/v1/nodes/gpu-r1-n1/cordon/", {"comment": "ECC errors"}, format="json")
    assert response.status_code == status
    if status == 200:
        assert response.json()["is_unschedulable"] is True
        assert AuditRecord.objects.get().comment == "ECC errors"
    else:
        assert not AuditRecord.objects.exists()


def test_a_cordoned_node_takes_no_new_gang(client_as):
    from scheduling.services import reconcile_pass_run

    for rack in (1, 2):
        for n in range(1, 5):
            client_as("admin").post(f"/api/v1/nodes/gpu-r{rack}-n{n}/cordon/", format="json")
    client_as("admin").post("/api/v1/nodes/gpu-r1-n1/uncordon/", format="json")
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": 2, "gpus_per_pod": 8}]),
                                                 format="json").json()["id"]
    assert job_id not in reconcile_pass_run().admitted
    one = client_as("vision-researcher").post("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}]),
                                              format="json").json()["id"]
    assert reconcile_pass_run().admitted == [one]


def test_cordoning_on_kubernetes_is_a_400_pointing_at_kubectl(client_as, settings):
    settings.GANGWAY_CLUSTER = "kubernetes"
    response = client_as("admin").post("/api/v1/nodes/gpu-r1-n1/cordon/", format="json")
    assert response.status_code == 400 and "kubectl cordon" in response.json()["node"][0]
