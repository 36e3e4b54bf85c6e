"""The authorisation matrix: every API URL × every role, one table. Roles: anonymous, a researcher of the job's
team and of another, a lead of the team and of another, an admin. A URL added to the API without a row fails."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from scheduling.models import Job, PodSet
from scheduling.services import reconcile_pass_run, job_submit, priority_class_create
from tests.conftest import H100, job_body

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "vision-researcher", "language-researcher", "vision-lead", "language-lead", "admin")
ANON = (401, 403)

# (method, url template, body, expected status per role in ROLES order). {job}, {plan} are filled in.
MATRIX = [
    ("get", "/api/v1/teams/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/teams/", {"name": "speech"}, (ANON, 403, 403, 403, 403, 201)),
    ("get", "/api/v1/teams/vision/", None, (ANON, 200, 200, 200, 200, 200)),
    ("patch", "/api/v1/teams/vision/", {"allotments": {H100: 32}}, (ANON, 403, 403, 403, 403, 200)),
    ("post", "/api/v1/teams/vision/preview", {"allotments": {H100: 32}}, (ANON, 403, 403, 403, 403, 200)),
    ("get", "/api/v1/queues/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/queues/", {"name": "vision-batch", "team": "vision"}, (ANON, 403, 403, 201, 403, 201)),
    ("get", "/api/v1/queues/vision-main/", None, (ANON, 200, 200, 200, 200, 200)),
    ("patch", "/api/v1/queues/vision-main/", {"weight": 2}, (ANON, 403, 403, 200, 403, 200)),
    ("post", "/api/v1/queues/vision-main/preview", {"weight": 2}, (ANON, 403, 403, 200, 403, 200)),
    ("get", "/api/v1/jobs/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/jobs/", job_body(), (ANON, 201, 403, 201, 403, 201)),
    ("get", "/api/v1/jobs/{job}/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/jobs/{job}/cancel/", None, (ANON, 200, 403, 200, 403, 200)),
    ("get", "/api/v1/nodes/", None, (ANON, 200, 200, 200, 200, 200)),
    ("get", "/api/v1/fleet/", None, (ANON, 200, 200, 200, 200, 200)),
    ("get", "/api/v1/usage/", None, (ANON, 200, 200, 200, 200, 200)),
    ("get", "/api/v1/preemptions/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/preemptions/{plan}/approve/", None, (ANON, 403, 403, 403, 403, 200)),
    ("post", "/api/v1/preemptions/{plan}/reject/", None, (ANON, 403, 403, 403, 403, 200)),
    ("get", "/api/v1/priority-classes/", None, (ANON, 200, 200, 200, 200, 200)),
    ("post", "/api/v1/priority-classes/", {"name": "urgent", "value": 50}, (ANON, 403, 403, 403, 403, 201)),
    ("get", "/api/v1/priority-classes/normal/", None, (ANON, 200, 200, 200, 200, 200)),
    ("patch", "/api/v1/priority-classes/normal/", {"description": "the default"}, (ANON, 403, 403, 403, 403, 200)),
    ("get", "/api/v1/audit/", None, (ANON, 403, 403, 200, 200, 200)),
    ("post", "/api/v1/nodes/gpu-r1-n1/cordon/", None, (ANON, 403, 403, 403, 403, 200)),
    ("post", "/api/v1/nodes/gpu-r1-n1/uncordon/", None, (ANON, 403, 403, 403, 403, 200)),
]


def api_routes(resolver=None, prefix="") -> set[str]:
    resolver = resolver or get_resolver()
    routes = set()
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes |= api_routes(pattern, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            routes.add(route)
    return routes


def test_every_api_url_has_a_row_in_the_matrix():
    covered = {url for _, url, _, _ in MATRIX}
    normalised = {
        "/" + r.replace("<str:name>", "gpu-r1-n1")
        .replace("<slug:name>", "vision" if r.startswith("api/v1/teams") else "normal" if r.startswith("api/v1/priority-classes") else "vision-main").replace("<int:pk>", "{job}" if "jobs" in r else "{plan}")
        .replace("^", "").replace("(?P<name>[-a-zA-Z0-9_]+)", "vision" if "teams" in r else "vision-main").replace("/?$", "")
        for r in api_routes()
    }
    assert normalised <= covered, f"no matrix row for {sorted(normalised - covered)}"


@pytest.fixture
def objects(org):
    from tests.api.test_endpoints import _plan

    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="secret-run",
                     pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}])
    plan = _plan(org)
    priority_class_create(actor=org["admin"], name="normal", value=0)
    for gang in Job.objects.filter(pod_sets__isnull=True):  # _plan's bare rows: give them the pod set a real gang has
        PodSet.objects.create(job=gang, name="worker", count=1, gpus_per_pod=gang.gpus)
    return {"job": job.pk, "plan": plan.pk}


@pytest.mark.parametrize(
    ("method", "url", "body", "role", "expected"),
    [pytest.param(m, u, b, role, statuses[i], id=f"{m} {u} as {role}") for m, u, b, statuses in MATRIX for i, role in enumerate(ROLES)],
)
def test_the_authorisation_matrix(client_as, objects, method, url, body, role, expected):
    client = client_as(None if role == "anonymous" else role)
    kwargs = {"format": "json"} if body is not None else {}
    response = getattr(client, method)(url.format(**objects), body, **kwargs) if body is not None else getattr(client, method)(url.format(**objects))
    assert response.status_code in (expected if isinstance(expected, tuple) else (expected,)), response.content[:300]


PRIVATE = ("name", "owner")


@pytest.mark.parametrize("role", ROLES[1:])
def test_private_fields_of_another_teams_job_are_hidden_in_lists_details_and_nested_objects(client_as, org, role):
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(name="secret-run"), format="json")
    job_id = response.json()["id"]
    reconcile_pass_run()
    sees_all = role in ("vision-researcher", "vision-lead", "admin")
    client = client_as(role)

    detail = client.get(f"/api/v1/jobs/{job_id}/").json()
    listed = client.get("/api/v1/jobs/").json()["results"]
    for seen in (detail, *listed):
        assert (seen["name"], seen["owner"]) == (("secret-run", "vision-researcher") if sees_all else (None, None))
    if not sees_all:
        assert "secret-run" not in client.get(f"/api/v1/jobs/{job_id}/").content.decode()
        assert {e.get("actor") for e in detail.get("events", ())} <= {None}
