"""Query counts are part of the contract: list endpoints stay flat as rows grow."""

from __future__ import annotations

from scheduling.models import Job
from scheduling.services import job_submit, reconcile_pass_run
from tests.conftest import H100


def many_jobs(org, n: int) -> None:
    for i in range(n):
        team = "vision" if i % 2 else "language"
        job_submit(user=org[f"{team}-researcher"], queue_name=f"{team}-main", flavor_name=H100, name=f"j{i}",
                   pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 1 + i % 4}])


def test_job_list_is_flat(client_as, org, django_assert_max_num_queries):
    many_jobs(org, 30)
    reconcile_pass_run()
    client = client_as("vision-researcher")
    with django_assert_max_num_queries(6):
        assert len(client.get("/api/v1/jobs/").json()["results"]) == 30


def test_job_detail_is_flat(client_as, org, django_assert_max_num_queries):
    many_jobs(org, 4)
    reconcile_pass_run()
    job = Job.objects.filter(queue__name="vision-main").order_by("pk").first()
    client = client_as("vision-researcher")
    with django_assert_max_num_queries(8):
        answer = client.get(f"/api/v1/jobs/{job.pk}/")
    assert answer.status_code == 200 and answer.json()["id"] == job.pk and answer.json()["pod_sets"]


def test_queue_team_node_fleet_and_preemption_lists_are_flat(client_as, org, django_assert_max_num_queries):
    many_jobs(org, 20)
    reconcile_pass_run()
    client = client_as("admin")
    for url, limit in [("/api/v1/queues/", 5), ("/api/v1/teams/", 5), ("/api/v1/nodes/", 3), ("/api/v1/fleet/", 4), ("/api/v1/preemptions/", 5)]:
        with django_assert_max_num_queries(limit):
            assert client.get(url).status_code == 200


def test_the_web_job_list_is_flat(org, client, django_assert_max_num_queries):
    many_jobs(org, 30)
    client.force_login(org["vision-researcher"])
    with django_assert_max_num_queries(10):
        assert client.get("/").status_code == 200


def test_the_reconcile_pass_reads_a_bounded_number_of_queries(org, django_assert_max_num_queries):
    many_jobs(org, 40)
    reconcile_pass_run()
    many_jobs(org, 40)
    # Writes scale with decisions (one update per admission); reads must not scale with pending jobs.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        reconcile_pass_run()
    reads = [q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    assert len(reads) < 40, len(reads)

