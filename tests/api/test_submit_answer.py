"""A submission answers with the job's detail as GET /api/v1/jobs/{id}/ reads it, without reading the job back."""

from __future__ import annotations

import pytest

from scheduling.models import PriorityClass
from tests.conftest import job_body

POD_TEMPLATE = {"metadata": {"labels": {"app": "train"}},
                "spec": {"containers": [{"name": "trainer", "image": "registry.example/train:1"}],
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


@pytest.mark.parametrize(
    ("user", "overrides"),
    [
        pytest.param("vision-researcher", {}, id="a researcher's gang with a topology"),
        pytest.param("vision-lead", {"pod_sets": [{"name": "launcher", "count": 1, "gpus_per_pod": 1},
                                                  {"name": "worker", "count": 3, "gpus_per_pod": 8}]}, id="two pod sets"),
        pytest.param("admin", {"priority": 500, "priority_class": "urgent", "preemptible": False, "topology": {}},
                     id="an admin's raw priority over a class"),
        pytest.param("vision-researcher", {"pod_template": POD_TEMPLATE, "checkpoint_interval_s": None},
                     id="a pod template's workload"),
    ],
)
def test_the_answer_to_a_submission_is_the_jobs_detail(client_as, user, overrides, django_assert_max_num_queries):
    PriorityClass.objects.create(name="urgent", value=100)
    client = client_as(user)

    # Queue, membership, flavor with its fleet, class and topology checks, three inserts, the transaction; two more
    # for a pod template (its namespace, its workload name).
    with django_assert_max_num_queries(12 if "pod_template" in overrides else 10):
        submitted = client.post("/api/v1/jobs/", job_body(**overrides), format="json")

    assert submitted.status_code == 201, submitted.json()
    assert submitted.json() == client.get(f"/api/v1/jobs/{submitted.json()['id']}/").json()
