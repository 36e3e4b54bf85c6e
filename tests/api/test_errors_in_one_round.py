"""A body's errors come back in one round: the serializer's (types, bounds, unknown fields) and the service's (unknown
names, quotas over the allotment, pod sets larger than any node) together, each under its dotted field path."""

from __future__ import annotations

import pytest

from scheduling.models import Job, PriorityClass, Queue, QueueQuota, Team, TeamAllotment
from tests.conftest import H100, job_body

pytestmark = pytest.mark.django_db


def written() -> tuple:
    return (Job.objects.count(), Queue.objects.count(), Team.objects.count(), PriorityClass.objects.count(),
            list(QueueQuota.objects.order_by("pk").values_list("nominal", flat=True)),
            list(TeamAllotment.objects.order_by("pk").values_list("gpus", flat=True)))


CASES = [
    pytest.param("vision-researcher", "post", "/api/v1/jobs/",
                 job_body(pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 16}], runtime_limit_s=-5),
                 {"pod_sets.0.gpus_per_pod", "runtime_limit_s"}, id="a job with a pod larger than any node and a negative runtime limit"),
    pytest.param("vision-researcher", "post", "/api/v1/jobs/",
                 job_body(queue="nope", pod_sets=[{"name": "w", "count": 0, "gpus_per_pod": 8}]),
                 {"queue", "pod_sets.0.count"}, id="a job in an unknown queue with zero pods"),
    pytest.param("vision-researcher", "post", "/api/v1/jobs/",
                 job_body(colour="blue", flavor="TPU-v9", topology={"required": "zone"}, checkpoint_interval_s="often"),
                 {"colour", "flavor", "topology.required", "checkpoint_interval_s"},
                 id="a job with an unknown field, flavor and topology level and a checkpoint interval that is no number"),
    pytest.param("admin", "post", "/api/v1/queues/",
                 {"name": "vision-batch", "team": "vision", "weight": 0, "quotas": {H100: {"nominal": 33}}},
                 {"weight", f"quotas.{H100}.nominal"}, id="a queue with a zero weight and quota beyond the allotment"),
    pytest.param("admin", "post", "/api/v1/queues/",
                 {"name": "Bad Name!", "team": "nope", "strategy": "lifo"},
                 {"name", "team", "strategy"}, id="a queue with a bad name, an unknown team and strategy"),
    pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/",
                 {"weight": -1, "quotas": {H100: {"nominal": 33}}},
                 {"weight", f"quotas.{H100}.nominal"}, id="a queue change with a negative weight and quota beyond the allotment"),
    pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/",
                 {"quotas": {H100: {"nominal": -1}, "TPU-v9": {"nominal": 1}}},
                 {f"quotas.{H100}.nominal", "quotas.TPU-v9"}, id="a quota change with a negative nominal and an unknown flavor"),
    pytest.param("vision-lead", "post", "/api/v1/queues/vision-main/preview/",
                 {"weight": 1000, "quotas": {H100: {"nominal": 33}}},
                 {"weight", f"quotas.{H100}.nominal"}, id="a preview with a weight above 100 and quota beyond the allotment"),
    pytest.param("admin", "post", "/api/v1/teams/",
                 {"name": "Speech Team", "allotments": {H100: -1, "TPU-v9": 8}},
                 {"name", f"allotments.{H100}", "allotments.TPU-v9"}, id="a team with a bad name, a negative and an unknown allotment"),
    pytest.param("admin", "patch", "/api/v1/teams/vision/",
                 {"allotments": {H100: 16, "A100": "lots"}},
                 {f"allotments.{H100}", "allotments.A100"}, id="an allotment below the queues' nominal beside one that is no number"),
    pytest.param("admin", "post", "/api/v1/teams/vision/preview/",
                 {"allotments": {"TPU-v9": 8, H100: "lots"}},
                 {"allotments.TPU-v9", f"allotments.{H100}"}, id="an allotment preview with an unknown flavor and a bad number"),
    pytest.param("admin", "post", "/api/v1/priority-classes/",
                 {"name": "Urgent!", "value": "high", "teams": ["nope"]},
                 {"name", "value", "teams"}, id="a priority class with a bad name, value and team"),
    pytest.param("admin", "patch", "/api/v1/priority-classes/urgent/",
                 {"teams": ["nope"], "max_gpus_per_team": -1},
                 {"teams", "max_gpus_per_team"}, id="a priority class change with an unknown team and a negative cap"),
]


@pytest.mark.parametrize(("user", "method", "url", "body", "fields"), CASES)
def test_every_error_of_a_body_is_reported_at_once_and_nothing_is_written(client_as, user, method, url, body, fields):
    PriorityClass.objects.create(name="urgent", value=100)
    before = written()

    response = getattr(client_as(user), method)(url, body, format="json")

    assert response.status_code == 400, response.content
    assert set(response.json()) == fields
    assert all(isinstance(reasons, list) and reasons and all(isinstance(r, str) for r in reasons)
               for reasons in response.json().values())
    assert written() == before


def test_the_type_error_of_a_field_is_its_only_reason(client_as):
    """The service saw the field as missing; its "unknown queue None" would only confuse."""
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(queue=["vision-main"]), format="json")

    assert response.status_code == 400
    assert response.json() == {"queue": ["Not a valid string."]}


def test_a_permission_denied_by_the_service_is_a_403_even_when_the_body_has_type_errors(client_as):
    response = client_as("vision-researcher").post("/api/v1/queues/", {"name": "mine", "team": "vision", "weight": "x"},
                                                   format="json")

    assert response.status_code == 403
