"""`/metrics`: Prometheus exposition behind a bearer token, with the families an operator alerts on."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduling.services import reconcile_pass_run, job_submit
from tests.conftest import H100

pytestmark = pytest.mark.django_db
TOKEN = "scrape-me"


@pytest.fixture
def scraped(client, org, settings):
    settings.GANGWAY_METRICS_TOKEN = TOKEN
    for i, count in enumerate((2, 2, 8)):
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"j{i}",
                   pod_sets=[{"name": "w", "count": count, "gpus_per_pod": 8}], now=1_800_000_000.0 + i)
    reconcile_pass_run(now=1_800_000_100.0)
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(family, **labels):
    return [s.value for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())]


def test_pending_jobs_by_queue_and_reason(scraped):
    assert samples(scraped["gangway_pending_workloads"], queue="vision-main", reason="quota") == [1.0]


def test_the_admission_wait_histogram_counts_each_admission(scraped):
    family = scraped["gangway_admission_wait_time_seconds"]
    assert [s.value for s in family.samples if s.name.endswith("_count")] == [2.0]


def test_queue_usage_nominal_and_borrowed(scraped):
    assert samples(scraped["gangway_queue_resource_usage"], queue="vision-main", flavor=H100) == [32.0]
    assert samples(scraped["gangway_queue_nominal_quota"], queue="vision-main", flavor=H100) == [32.0]
    assert samples(scraped["gangway_queue_borrowed_gpus"], queue="vision-main", flavor=H100) == [0.0]


def test_pass_phases_and_counters(scraped):
    phases = {s.labels["phase"] for s in scraped["gangway_reconcile_pass_duration_seconds"].samples}
    assert phases == {"observe", "snapshot", "cycle", "persist", "apply", "fleet", "explain"}  # a first pass has all
    assert samples(scraped["gangway_reconcile_passes"]) == [1.0]
    assert samples(scraped["gangway_transition_conflicts"]) == [0.0]
    assert "gangway_cluster_api_errors" in scraped and "gangway_preempted_workloads" in scraped
    assert "gangway_explanation_age_seconds" in scraped and "gangway_estimate_age_seconds" in scraped


@pytest.mark.parametrize(("token", "header", "status"), [
    pytest.param(TOKEN, None, 401, id="no token sent"),
    pytest.param(TOKEN, "Bearer wrong", 401, id="a wrong token"),
    pytest.param("", f"Bearer {TOKEN}", 404, id="metrics off when no token is configured"),
])
def test_metrics_need_the_token(client, db, settings, token, header, status):
    settings.GANGWAY_METRICS_TOKEN = token
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    assert client.get("/metrics", **extra).status_code == status
