"""Policy bounds: cohort membership is set by admins only; a queue's weight is within (0, 100]; a non-preemptible
job never borrows another team's quota, so it cannot lock quota the other team lent."""

from __future__ import annotations

import pytest

from scheduling.models import Job, Queue
from scheduling.services import reconcile_pass_run
from tests.conftest import H100, job_body, stored_explanation

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("user", "method", "url", "body", "status"),
    [
        pytest.param("vision-lead", "post", "/api/v1/queues/", {"name": "vision-batch", "team": "vision", "cohort": "shared"}, 403,
                     id="a lead cannot create a queue inside a cohort"),
        pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/", {"cohort": "elsewhere"}, 403,
                     id="a lead cannot move a queue into another cohort"),
        pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/", {"cohort": None}, 403,
                     id="a lead cannot take a queue out of its cohort"),
        pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/", {"cohort": "shared", "weight": 2}, 200,
                     id="a lead may restate the cohort it has"),
        pytest.param("vision-lead", "post", "/api/v1/queues/", {"name": "vision-batch", "team": "vision"}, 201,
                     id="a lead creates a queue outside any cohort"),
        pytest.param("admin", "patch", "/api/v1/queues/vision-main/", {"cohort": "elsewhere"}, 200,
                     id="an admin moves a queue into another cohort"),
        pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/", {"weight": 100}, 200, id="a weight of 100 is allowed"),
        pytest.param("vision-lead", "patch", "/api/v1/queues/vision-main/", {"weight": 1e300}, 400, id="a weight of 1e300 is not"),
    ],
)
def test_who_sets_cohorts_and_weights(client_as, user, method, url, body, status):
    cohorts_before = dict(Queue.objects.values_list("name", "cohort__name"))

    response = getattr(client_as(user), method)(url, body, format="json")

    assert response.status_code == status, response.json()
    if status >= 400:
        assert dict(Queue.objects.values_list("name", "cohort__name")) == cohorts_before


def test_a_non_preemptible_job_cannot_borrow_the_other_teams_lent_quota(client_as):
    researcher = client_as("language-researcher")
    body = job_body(queue="language-main", preemptible=False, topology={},
                    pod_sets=[{"name": "worker", "count": 6, "gpus_per_pod": 8}])
    job_id = researcher.post("/api/v1/jobs/", body, format="json").json()["id"]

    result = reconcile_pass_run()

    assert job_id not in result.admitted
    job = Job.objects.get(pk=job_id)
    assert stored_explanation(job)["blocking"] == "quota" and stored_explanation(job)["quota"]["limit"] == "not_preemptible"
    owner = client_as("vision-researcher").post("/api/v1/jobs/", job_body(topology={}, pod_sets=[
        {"name": "worker", "count": 4, "gpus_per_pod": 8}]), format="json").json()["id"]
    assert owner in reconcile_pass_run().admitted, "vision's own nominal quota is there for it, with no plan needed"
