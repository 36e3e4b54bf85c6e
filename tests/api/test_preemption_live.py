"""Preemption end to end through the API: jobs submitted over HTTP, the reconcile pass, the plan it executed."""

from __future__ import annotations

import time

from scheduling.models import QueueQuota
from scheduling.services import reconcile_pass_run, priority_class_create
from tests.conftest import job_body


def test_a_high_priority_job_preempts_exactly_the_lowest_priority_job_of_its_queue_in_one_pass(client_as, org):
    # Language lends nothing, so vision's nominal 32 GPUs bind: four whole-node jobs fill them.
    QueueQuota.objects.filter(queue__name="language-main").update(lending_limit=0)
    vision, admin = client_as("vision-researcher"), client_as("admin")
    for value in (0, 50, 100):
        priority_class_create(actor=org["admin"], name=f"p{value}", value=value)

    def submit(name: str, priority: int) -> int:
        body = job_body(name=name, priority_class=f"p{priority}", pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}])
        response = vision.post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    def state(job_id: int) -> str:
        return vision.get(f"/api/v1/jobs/{job_id}/").json()["state"]

    t0 = time.time()
    low = submit("low", 0)
    reconcile_pass_run(now=t0 + 1)
    reconcile_pass_run(now=t0 + 2)  # running since t0 + 2
    mid, mid_too, high = submit("mid", 50), submit("mid-too", 50), submit("high", 100)
    reconcile_pass_run(now=t0 + 300)
    reconcile_pass_run(now=t0 + 302)  # running since t0 + 302: less work to lose than `low`
    assert [state(j) for j in (low, mid, mid_too, high)] == ["running"] * 4

    urgent = submit("urgent", 100)
    result = reconcile_pass_run(now=t0 + 500)

    # The lowest priority goes, though a mid-priority job would cost less; nothing else moves.
    assert (result.admitted, result.preempted) == ([urgent], [low])
    assert [state(j) for j in (low, mid, mid_too, high, urgent)] == ["pending", "running", "running", "running", "admitted"]
    (plan,) = admin.get("/api/v1/preemptions/").json()["results"]
    assert (plan["status"], [v["job"] for v in plan["victims"]]) == ("executed", [low])

    # The next pass finds nothing left to preempt for the requeued job: no cascade.
    result = reconcile_pass_run(now=t0 + 510)
    assert (result.admitted, result.preempted) == ([], [])
    assert len(admin.get("/api/v1/preemptions/").json()["results"]) == 1
