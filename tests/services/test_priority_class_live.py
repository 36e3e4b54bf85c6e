"""A priority class's GPU cap, live: reconcile passes over the database keep a team within it, and say why a job waits."""

from __future__ import annotations

import pytest

from scheduling.core.model import JobState
from scheduling.models import Job
from scheduling.services import reconcile_pass_run, job_cancel, job_submit, priority_class_create, priority_class_update
from tests.conftest import H100

pytestmark = pytest.mark.usefixtures("every_plan_runs")

T0 = 1_800_000_000.0


def submit(org, name: str, *, gpus: int, priority_class: str | None = "high", at: float = T0) -> Job:
    return job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": gpus // 8, "gpus_per_pod": 8}], priority_class=priority_class,
                      runtime_limit_s=3600, now=at)


def state(job: Job) -> str:
    job.refresh_from_db()
    return job.state


def test_a_job_over_its_classs_cap_waits_with_the_reason_and_starts_when_the_team_is_back_under_it(org, client_as):
    priority_class_create(actor=org["admin"], name="high", value=10, max_gpus_per_team=16)
    first, second = submit(org, "first", gpus=16), submit(org, "second", gpus=8, at=T0 + 1)
    plain = submit(org, "plain", gpus=8, priority_class=None, at=T0 + 2)
    result = reconcile_pass_run(now=T0 + 10)
    assert set(result.admitted) == {first.pk, plain.pk}
    assert state(second) == JobState.PENDING

    explanation = client_as("vision-researcher").get(f"/api/v1/jobs/{second.pk}/").json()["explanation"]
    assert explanation["blocking"] == "priority_class"
    assert explanation["summary"] == ("priority class high: team vision runs 16 of its 16 GPUs at high; "
                                      "this job needs 8, so it waits until 8 of them are freed")
    page = client_as("vision-researcher").get("/api/v1/jobs/?state=pending").json()["results"]
    assert [(j["id"], j["why"]) for j in page] == [(second.pk, explanation.get("headline") or explanation["summary"])]

    job_cancel(user=org["vision-researcher"], job_id=first.pk)
    assert second.pk in reconcile_pass_run(now=T0 + 20).admitted


def test_raising_the_cap_lets_the_waiting_job_start_on_the_next_pass(org):
    priority_class_create(actor=org["admin"], name="high", value=10, max_gpus_per_team=8)
    running, waiting = submit(org, "running", gpus=8), submit(org, "waiting", gpus=8, at=T0 + 1)
    reconcile_pass_run(now=T0 + 10)
    assert (state(running), state(waiting)) == (JobState.ADMITTED, JobState.PENDING)
    priority_class_update(actor=org["admin"], name="high", max_gpus_per_team=None)
    assert waiting.pk in reconcile_pass_run(now=T0 + 20).admitted
