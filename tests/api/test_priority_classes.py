"""Priority classes over the API: admins define them; researchers and leads choose one, never a raw number."""

from __future__ import annotations

import pytest

from scheduling.models import Job, PriorityClass
from scheduling.services import priority_class_create
from tests.conftest import job_body


@pytest.fixture
def classes(org):
    admin = org["admin"]
    priority_class_create(actor=admin, name="normal", value=0, is_default=True)
    priority_class_create(actor=admin, name="high", value=10, max_gpus_per_team=16)
    priority_class_create(actor=admin, name="urgent", value=50, teams=["language"])


@pytest.mark.parametrize("user, status", [("admin", 201), ("vision-lead", 403), ("vision-researcher", 403), ("outsider", 403), (None, 403)])
def test_only_admins_create_priority_classes(client_as, user, status):
    response = client_as(user).post("/api/v1/priority-classes/", {"name": "low", "value": -5}, format="json")
    assert response.status_code == status
    assert PriorityClass.objects.filter(name="low").exists() is (status == 201)


@pytest.mark.parametrize("user, status", [("admin", 200), ("vision-lead", 403), ("vision-researcher", 403)])
def test_only_admins_change_priority_classes(client_as, classes, user, status):
    response = client_as(user).patch("/api/v1/priority-classes/high/", {"max_gpus_per_team": 32}, format="json")
    assert response.status_code == status
    assert PriorityClass.objects.get(name="high").max_gpus_per_team == (32 if status == 200 else 16)


def test_everyone_signed_in_reads_the_classes(client_as, classes):
    listed = client_as("vision-researcher").get("/api/v1/priority-classes/").json()
    assert [(c["name"], c["value"], c["is_default"], c["teams"], c["max_gpus_per_team"]) for c in listed] == [
        ("urgent", 50, False, ["language"], None), ("high", 10, False, None, 16), ("normal", 0, True, None, None),
    ]


def test_a_new_default_takes_over_from_the_old_one(client_as, classes):
    response = client_as("admin").patch("/api/v1/priority-classes/high/", {"is_default": True}, format="json")
    assert response.status_code == 200
    assert list(PriorityClass.objects.filter(is_default=True).values_list("name", flat=True)) == ["high"]


BAD_CLASSES = [
    pytest.param({"name": "Not A Slug", "value": 1}, "name", id="a name that is not a slug"),
    pytest.param({"name": "high", "value": 1}, "name", id="a name taken"),
    pytest.param({"name": "x", "value": 10**7}, "value", id="a value out of range"),
    pytest.param({"name": "x", "value": "high"}, "value", id="a value not a number"),
    pytest.param({"name": "x", "value": 1, "teams": ["nobody"]}, "teams", id="an unknown team"),
    pytest.param({"name": "x", "value": 1, "max_gpus_per_team": -1}, "max_gpus_per_team", id="a negative cap"),
    pytest.param({"name": "x", "value": 1, "colour": "red"}, "colour", id="an unknown field"),
]


@pytest.mark.parametrize("body, field", BAD_CLASSES)
def test_a_bad_class_is_a_400_naming_the_field(client_as, classes, body, field):
    response = client_as("admin").post("/api/v1/priority-classes/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert PriorityClass.objects.count() == 3


def test_a_job_without_a_class_gets_the_default_and_its_value(client_as, classes):
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(), format="json")
    assert response.status_code == 201
    assert (response.json()["priority_class"], response.json()["priority"]) == ("normal", 0)


def test_a_job_at_a_class_gets_the_classs_value(client_as, classes):
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(priority_class="high"), format="json")
    assert (response.status_code, response.json()["priority_class"], response.json()["priority"]) == (201, "high", 10)


BAD_SUBMISSIONS = [
    pytest.param("vision-researcher", {"priority": 100}, "priority", "only admins set a raw priority; choose a priority_class instead", id="a researcher sets a raw priority"),
    pytest.param("vision-lead", {"priority": 0}, "priority", "only admins set a raw priority; choose a priority_class instead", id="a lead sets a raw priority"),
    pytest.param("vision-researcher", {"priority_class": "vip"}, "priority_class", "unknown priority class 'vip'", id="an unknown class"),
    pytest.param("vision-researcher", {"priority_class": "urgent"}, "priority_class", "team vision may not use priority class urgent",
                 id="a class the team may not use"),
    pytest.param("vision-researcher", {"priority_class": "high", "pod_sets": [{"name": "w", "count": 3, "gpus_per_pod": 8}]},
                 "priority_class", "the gang needs 24 GPUs; a team may run at most 16 at high", id="a gang larger than the class's cap"),
]


@pytest.mark.parametrize("user, overrides, field, reason", BAD_SUBMISSIONS)
def test_a_submission_with_a_bad_priority_is_a_400_naming_the_field(client_as, classes, user, overrides, field, reason):
    response = client_as(user).post("/api/v1/jobs/", job_body(**overrides), format="json")
    assert response.status_code == 400
    assert response.json()[field] == [reason]
    assert Job.objects.count() == 0


def test_an_admin_may_set_a_raw_priority_over_the_class(client_as, classes):
    response = client_as("admin").post("/api/v1/jobs/", job_body(priority_class="high", priority=99), format="json")
    assert (response.status_code, response.json()["priority_class"], response.json()["priority"]) == (201, "high", 99)


def test_the_class_a_team_may_use_is_open_to_its_members(client_as, classes):
    response = client_as("language-researcher").post("/api/v1/jobs/", job_body(queue="language-main", priority_class="urgent"), format="json")
    assert (response.status_code, response.json()["priority"]) == (201, 50)


def test_a_new_value_moves_the_classs_pending_jobs(client_as, classes):
    job_id = client_as("vision-researcher").post("/api/v1/jobs/", job_body(priority_class="high"), format="json").json()["id"]
    client_as("admin").patch("/api/v1/priority-classes/high/", {"value": 20}, format="json")
    assert Job.objects.get(pk=job_id).priority == 20
