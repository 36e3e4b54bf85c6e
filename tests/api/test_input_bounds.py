"""Input bounds: integers within their database columns, NUL characters, JSON depth and size, form bodies, and one
flat error shape for every 4xx — always a 4xx naming the field, never a 500, nothing written."""

from __future__ import annotations

import json

import pytest

from scheduling.models import Cohort, Flavor, Job, Queue, QueueQuota, Team
from tests.conftest import H100, job_body

pytestmark = pytest.mark.django_db
TOO_BIG = 2**31


def queue_body(**overrides) -> dict:
    return {"name": "vision-batch", "team": "vision", "quotas": {H100: {"nominal": 0}}, **overrides}


BAD = [
    pytest.param("/api/v1/jobs/", job_body(runtime_limit_s=TOO_BIG), "runtime_limit_s", id="runtime limit of 2^31 s"),
    pytest.param("/api/v1/jobs/", job_body(checkpoint_interval_s=TOO_BIG), "checkpoint_interval_s", id="checkpoint interval of 2^31 s"),
    pytest.param("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": TOO_BIG, "gpus_per_pod": 8}]), "pod_sets.0.count",
                 id="2^31 pods"),
    pytest.param("/api/v1/jobs/", job_body(pod_sets=[{"name": "w", "count": "two", "gpus_per_pod": 8}]), "pod_sets.0.count",
                 id="a nested error has a dotted path"),
    pytest.param("/api/v1/jobs/", job_body(queue="q" * 64), "queue", id="a queue name longer than its column"),
    pytest.param("/api/v1/jobs/", job_body(name="llama\x00"), "name", id="a NUL character in a string"),
    pytest.param("/api/v1/jobs/", job_body(pod_template={"spec": {"containers": [{"name": "t", "image": "i\x00"}]}}),
                 "pod_template.spec.containers.0.image", id="a NUL character in the pod template"),
    pytest.param("/api/v1/queues/", queue_body(quotas={H100: {"nominal": TOO_BIG}}), f"quotas.{H100}.nominal", id="a nominal of 2^31"),
    pytest.param("/api/v1/queues/", queue_body(quotas={H100: {"nominal": 0, "borrowing_limit": TOO_BIG}}),
                 f"quotas.{H100}.borrowing_limit", id="a borrowing limit of 2^31"),
    pytest.param("/api/v1/queues/", queue_body(quotas={"H100\x00": {"nominal": 0}}), "quotas.H100", id="a NUL character in a quota key"),
    pytest.param("/api/v1/queues/", queue_body(weight=1e300), "weight", id="a weight of 1e300"),
    pytest.param("/api/v1/queues/", queue_body(weight=100.5), "weight", id="a weight above 100"),
    pytest.param("/api/v1/teams/", {"name": "speech", "allotments": {H100: TOO_BIG}}, f"allotments.{H100}", id="an allotment of 2^31"),
]


@pytest.mark.parametrize(("url", "body", "field"), BAD)
def test_a_value_out_of_bounds_is_a_400_naming_the_field_and_nothing_is_written(client_as, url, body, field):
    before = (Job.objects.count(), Queue.objects.count(), Team.objects.count())

    response = client_as("admin" if "jobs" not in url else "vision-researcher").post(url, body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert all(isinstance(reasons, list) and all(isinstance(r, str) for r in reasons) for reasons in response.json().values())
    assert (Job.objects.count(), Queue.objects.count(), Team.objects.count()) == before


def test_the_largest_values_the_columns_hold_are_accepted(client_as):
    Flavor.objects.create(name="TPU-v9")  # no nodes yet: its borrowing limit is not held to the fleet's size
    response = client_as("admin").post("/api/v1/queues/", queue_body(weight=100, quotas={"TPU-v9": {"nominal": 0, "borrowing_limit": TOO_BIG - 1}}),
                                       format="json")

    assert response.status_code == 201, response.json()
    assert QueueQuota.objects.get(queue__name="vision-batch").borrowing_limit == TOO_BIG - 1


@pytest.mark.parametrize(
    ("raw", "status", "field"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, 400, "body", id="100,000 nested brackets"),
        pytest.param('{"name": "x", "deep": ' + "[" * 40 + "]" * 40 + "}", 400, "body",
                     id="nesting deeper than 32 levels"),
        pytest.param(json.dumps({"name": "x" * (2 * 1024 * 1024)}), 413, "body", id="a body of 2 MiB"),
    ],
)
def test_bodies_too_deep_or_too_large_are_refused(client_as, raw, status, field):
    response = client_as("admin").post("/api/v1/teams/", raw, content_type="application/json")

    assert response.status_code == status
    assert list(response.json()) == [field]


def test_a_form_encoded_body_is_refused_with_415_instead_of_dropping_the_nested_quotas(client_as):
    response = client_as("admin").post("/api/v1/queues/", {"name": "vision-batch", "team": "vision", "cohort": "null"})

    assert response.status_code == 415
    assert list(response.json()) == ["body"]
    assert not Queue.objects.filter(name="vision-batch").exists() and not Cohort.objects.filter(name="null").exists()


def test_a_json_null_cohort_is_no_cohort(client_as):
    response = client_as("admin").post("/api/v1/queues/", queue_body(cohort=None), format="json")

    assert response.status_code == 201 and response.json()["cohort"] is None
    assert not Cohort.objects.filter(name="null").exists()


@pytest.mark.parametrize("url", ["/api/v1/jobs/?owner=a%00b", "/api/v1/jobs/?queue=%00", "/api/v1/preemptions/?status=%00",
                                 "/api/v1/queues/?team=vi%00sion"])
def test_a_nul_character_in_a_query_parameter_is_a_400_naming_it(client_as, url):
    response = client_as("vision-researcher").get(url)

    assert response.status_code == 400
    name = url.split("?")[1].split("=")[0]
    assert response.json() == {f"query.{name}": ["NUL characters (%00) are not allowed"]}


@pytest.mark.parametrize(
    ("user", "method", "url", "status"),
    [
        pytest.param(None, "get", "/api/v1/jobs/", 401, id="anonymous"),
        pytest.param("vision-researcher", "post", "/api/v1/teams/", 403, id="forbidden"),
        pytest.param("vision-researcher", "get", "/api/v1/jobs/999999/", 404, id="missing"),
        pytest.param("vision-researcher", "delete", "/api/v1/jobs/", 405, id="method not allowed"),
    ],
)
def test_every_4xx_has_the_same_flat_shape(client_as, user, method, url, status):
    response = getattr(client_as(user), method)(url, {"name": "x"}, format="json")

    assert response.status_code in (status, 403 if status == 401 else status)
    body = response.json()
    assert body and all(isinstance(k, str) and isinstance(v, list) and all(isinstance(r, str) for r in v) for k, v in body.items()), body


@pytest.mark.parametrize(
    ("url", "field"),
    [
        pytest.param("/api/v1/preemptions/?limit=99999999999999999999", None, id="a 20-digit limit on the preemptions is capped"),
        pytest.param("/api/v1/jobs/?limit=99999999999999999999", None, id="a 20-digit limit on the jobs is capped"),
        pytest.param("/api/v1/nodes/?limit=99999999999999999999", None, id="a 20-digit limit on the nodes is capped"),
        pytest.param("/api/v1/preemptions/?offset=99999999999999999999", "offset", id="an offset past any database's is a 400"),
        pytest.param("/api/v1/preemptions/?limit=ten", "limit", id="a limit that is no number is a 400"),
        pytest.param("/api/v1/jobs/?limit=%C2%B2", "limit", id="a superscript digit is no whole number"),
        pytest.param("/api/v1/audit/?limit=99999999999999999999", "limit", id="the audit log's limit is at most 200"),
        pytest.param("/api/v1/audit/?before=99999999999999999999", "before", id="an audit id past bigint is a 400"),
        pytest.param("/api/v1/preemptions/?status=pending", "status", id="an unknown plan status is a 400"),
        pytest.param("/api/v1/usage/?window_s=nan", "window_s", id="a window that is not a number is a 400"),
    ],
)
def test_huge_or_malformed_paging_parameters_are_capped_or_a_400_naming_them(client_as, url, field):
    response = client_as("admin").get(url)

    if field is None:
        assert response.status_code == 200, response.json()
        assert len(response.json()["results"]) <= 500
    else:
        assert response.status_code == 400, response.content
        assert field in response.json(), response.json()


def test_a_nul_character_in_an_allotment_key_is_a_400(client_as):
    response = client_as("admin").post("/api/v1/teams/", {"name": "speech", "allotments": {"H100\x00": 8}}, format="json")

    assert response.status_code == 400
    assert "allotments.H100" in response.json()
    assert not Team.objects.filter(name="speech").exists()
