"""Every bad input gets 400 with the field and the reason, and writes nothing."""

from __future__ import annotations

import json

import pytest

from scheduling.models import Cohort, Job, JobEvent, PodSet, Queue, QueueQuota, Team, TeamAllotment
from tests.conftest import H100, job_body


def counts() -> tuple:
    return tuple(m.objects.count() for m in (Job, PodSet, JobEvent, Team, TeamAllotment, Queue, QueueQuota, Cohort))


def quota_values() -> list:
    return list(QueueQuota.objects.order_by("pk").values_list("nominal", "borrowing_limit", "lending_limit"))


BAD_JOBS = [
    pytest.param({"queue": "nope"}, "queue", id="unknown queue"),
    pytest.param({"flavor": "TPU-v9"}, "flavor", id="unknown flavor"),
    pytest.param({"pod_sets": [{"name": "w", "count": 0, "gpus_per_pod": 8}]}, "pod_sets", id="zero pods"),
    pytest.param({"pod_sets": [{"name": "w", "count": -3, "gpus_per_pod": 8}]}, "pod_sets", id="negative pods"),
    pytest.param({"pod_sets": [{"name": "w", "count": 1, "gpus_per_pod": 0}]}, "pod_sets", id="zero gpus per pod"),
    pytest.param({"pod_sets": [{"name": "w", "count": 1, "gpus_per_pod": 16}]}, "pod_sets.0.gpus_per_pod", id="more gpus per pod than any node has"),
    pytest.param({"pod_sets": [{"name": "w", "count": 9, "gpus_per_pod": 8}]}, "pod_sets", id="gang larger than the whole fleet"),
    pytest.param({"pod_sets": []}, "pod_sets", id="no pod sets"),
    pytest.param({"pod_sets": "lots"}, "pod_sets", id="pod sets not a list"),
    pytest.param({"pod_sets": [{"name": "w", "count": 1, "gpus_per_pod": 1}, {"name": "w", "count": 1, "gpus_per_pod": 1}]}, "pod_sets.1.name", id="duplicate pod set names"),
    pytest.param({"topology": {"required": "zone"}}, "topology.required", id="unknown required topology level"),
    pytest.param({"topology": {"preferred": "row"}}, "topology.preferred", id="unknown preferred topology level"),
    pytest.param({"topology": {"required": "rack", "preferred": "block"}}, "topology.preferred", id="preferred coarser than required"),
    pytest.param({"topology": "block"}, "topology", id="topology not an object"),
    pytest.param({"name": ""}, "name", id="empty name"),
    pytest.param({"priority": "high"}, "priority", id="priority not a number"),
    pytest.param({"runtime_limit_s": -5}, "runtime_limit_s", id="negative runtime limit"),
    pytest.param({"checkpoint_interval_s": 0}, "checkpoint_interval_s", id="zero checkpoint interval"),
    pytest.param({"preemptible": "maybe"}, "preemptible", id="preemptible not a boolean"),
    pytest.param({"colour": "blue"}, "colour", id="unknown field"),
]


@pytest.mark.parametrize("override, field", BAD_JOBS)
def test_bad_job_submission_is_rejected_and_writes_nothing(client_as, override, field):
    before = counts()
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(**override), format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert any(key == field or key.startswith(field + ".") or key.startswith(field) for key in body), body
    assert all(isinstance(reasons, (list, dict)) for reasons in body.values())
    assert counts() == before


@pytest.mark.parametrize(
    "raw",
    [pytest.param("{not json", id="broken JSON"), pytest.param("[1, 2]", id="a JSON list"), pytest.param('"text"', id="a JSON string"),
     pytest.param("", id="empty body")],
)
@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/teams/", "/api/v1/queues/"])
def test_a_body_that_is_not_a_json_object_is_rejected(client_as, raw, url):
    before = counts()
    response = client_as("admin").post(url, raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()
    assert counts() == before


def queue_body(**overrides) -> dict:
    body = {"name": "vision-batch", "team": "vision", "cohort": "shared", "weight": 1,
            "quotas": {H100: {"nominal": 0, "borrowing_limit": None, "lending_limit": None}}}
    body.update(overrides)
    return body


BAD_QUEUES = [
    pytest.param({"quotas": {H100: 5}}, "quotas", id="quota value not an object"),
    pytest.param({"quotas": [1]}, "quotas", id="quotas not an object"),
    pytest.param({"quotas": {H100: {"nominal": -1}}}, "quotas", id="negative nominal"),
    pytest.param({"quotas": {H100: {"nominal": 1, "borrowing_limit": -2}}}, "quotas", id="negative borrowing limit"),
    pytest.param({"quotas": {H100: {"nominal": 0, "lending_limit": 4}}}, "quotas", id="lending limit above nominal"),
    pytest.param({"quotas": {H100: {"nominal": 0, "borrowing_limit": 100_000}}}, f"quotas.{H100}.borrowing_limit",
                 id="a borrowing limit larger than the fleet"),
    pytest.param({"quotas": {H100: {"nominal": 1, "extra": 1}}}, "quotas", id="unknown quota key"),
    pytest.param({"quotas": {"TPU-v9": {"nominal": 1}}}, "quotas.TPU-v9", id="unknown flavor"),
    pytest.param({"quotas": {H100: {"nominal": 1}}}, f"quotas.{H100}.nominal", id="nominals above the team's allotment"),
    pytest.param({"team": "nope"}, "team", id="unknown team"),
    pytest.param({"name": "Bad Name!"}, "name", id="invalid name"),
    pytest.param({"name": "vision-main"}, "name", id="duplicate name"),
    pytest.param({"weight": 0}, "weight", id="zero weight"),
    pytest.param({"strategy": "lifo"}, "strategy", id="unknown strategy"),
    pytest.param({"cohort": "Not A Slug"}, "cohort", id="invalid cohort name"),
]


@pytest.mark.parametrize("override, field", BAD_QUEUES)
def test_bad_queue_creation_is_rejected_and_writes_nothing(client_as, override, field):
    before = counts()
    response = client_as("admin").post("/api/v1/queues/", queue_body(**override), format="json")
    assert response.status_code == 400, response.content
    assert any(key.startswith(field) for key in response.json()), response.json()
    assert counts() == before


@pytest.mark.parametrize(
    "patch, field",
    [
        pytest.param({"quotas": {H100: {"nominal": 33}}}, f"quotas.{H100}.nominal", id="nominal above allotment"),
        pytest.param({"quotas": {H100: "lots"}}, "quotas", id="quota not an object"),
        pytest.param({"quotas": {H100: {"nominal": 8}, "TPU-v9": {"nominal": 1}}}, "quotas.TPU-v9", id="one unknown flavor spoils the whole change"),
        pytest.param({"weight": -1}, "weight", id="negative weight"),
        pytest.param({"team": "language"}, "team", id="team cannot change"),
    ],
)
def test_bad_queue_patch_is_rejected_and_changes_nothing(client_as, patch, field):
    before, quotas = counts(), quota_values()
    response = client_as("vision-lead").patch("/api/v1/queues/vision-main/", patch, format="json")
    assert response.status_code == 400, response.content
    assert any(key.startswith(field) for key in response.json()), response.json()
    assert (counts(), quota_values()) == (before, quotas)


@pytest.mark.parametrize(
    "body, field",
    [
        pytest.param({"name": "speech", "allotments": {H100: -1}}, "allotments", id="negative allotment"),
        pytest.param({"name": "speech", "allotments": {"TPU-v9": 8}}, "allotments.TPU-v9", id="unknown flavor"),
        pytest.param({"name": "speech", "allotments": [8]}, "allotments", id="allotments not an object"),
        pytest.param({"name": "vision"}, "name", id="duplicate team"),
        pytest.param({"name": "Speech Team"}, "name", id="invalid name"),
    ],
)
def test_bad_team_creation_is_rejected_and_writes_nothing(client_as, body, field):
    before = counts()
    response = client_as("admin").post("/api/v1/teams/", body, format="json")
    assert response.status_code == 400, response.content
    assert any(key.startswith(field) for key in response.json()), response.json()
    assert counts() == before


def test_lowering_an_allotment_below_the_queues_nominal_is_rejected(client_as):
    before = list(TeamAllotment.objects.values_list("gpus", flat=True))
    response = client_as("admin").patch("/api/v1/teams/vision/", {"allotments": {H100: 16}}, format="json")
    assert response.status_code == 400
    assert f"allotments.{H100}" in response.json()
    assert list(TeamAllotment.objects.values_list("gpus", flat=True)) == before


def test_error_bodies_are_json_objects_of_lists(client_as):
    response = client_as("vision-researcher").post("/api/v1/jobs/", json.dumps({"queue": "nope"}), content_type="application/json")
    assert response.status_code == 400
    assert all(isinstance(v, list) for v in response.json().values())
