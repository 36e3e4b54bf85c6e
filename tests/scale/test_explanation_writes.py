"""Explanations are stored once per distinct answer and written only when they say something new, not as time passes."""

from __future__ import annotations

from scheduling.models import Explanation, Job
from scheduling.services import reconcile_pass_run, job_submit
from scheduling.services.explanations import explanation_fingerprint, explanation_keys
from tests.core.builders import a_gang
from tests.conftest import H100, stored_explanation


def test_a_fingerprint_ignores_the_gpu_hours_a_fix_would_cost_and_nothing_else():
    base = {"blocking": "quota", "summary": "waits", "fixes": [
        {"action": "preempt", "cost_gpu_hours": 1.5, "detail": "preempt #3 (vision, 8 GPUs, 1.5 GPU-h)"}]}
    later = {**base, "fixes": [{"action": "preempt", "cost_gpu_hours": 9.25, "detail": "preempt #3 (vision, 8 GPUs, 9.2 GPU-h)"}]}
    other = {**base, "summary": "waits for nodes"}
    assert explanation_fingerprint(base) == explanation_fingerprint(later)
    assert explanation_fingerprint(base) != explanation_fingerprint(other)


def submit_big(org, count: int, *, at: float = 1000.0) -> None:
    for i in range(count):
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"big{i}",
                   pod_sets=[{"name": "w", "count": 4, "gpus_per_pod": 8}], now=at + i)


def test_jobs_of_one_shape_share_one_stored_explanation(org):
    submit_big(org, 8)
    reconcile_pass_run(now=2000.0)
    waiting = list(Job.objects.filter(state="pending").order_by("submitted_at"))
    assert len(waiting) == 6 and len({job.explanation_key for job in waiting}) == 1
    assert Explanation.objects.count() == 1
    assert stored_explanation(waiting[0])["summary"] == stored_explanation(waiting[5])["summary"]


def test_a_job_whose_answer_differs_from_its_shapes_gets_a_row_of_its_own():
    jobs = [a_gang(pods=1, gpus=8).in_queue("q").id(i).build() for i in range(1, 5)]
    shared, own = object(), object()
    keys = explanation_keys(jobs, {1: shared, 2: own, 3: shared, 4: shared})
    assert keys[2] == "j:2" and keys[1] == keys[3] == keys[4] and keys[1].startswith("s:")
    other_queue = [a_gang(pods=1, gpus=8).in_queue("r").id(5).build()]
    assert explanation_keys(other_queue, {5: shared})[5] != keys[1]


def test_a_later_pass_with_nothing_new_rewrites_no_explanation(org):
    submit_big(org, 4)
    reconcile_pass_run(now=2000.0)
    waiting = Job.objects.filter(state="pending")
    assert waiting.exists() and all(stored_explanation(job) for job in waiting)
    written_at = {job.pk: stored_explanation(job)["checked_at"] for job in waiting}
    reconcile_pass_run(now=2600.0)  # ten minutes later: running jobs' cost grew, nothing else changed
    assert {job.pk: stored_explanation(job)["checked_at"] for job in Job.objects.filter(state="pending")} == written_at


def test_an_admitted_job_leaves_its_explanation_and_rows_nobody_refers_to_go(org, settings):
    settings.GANGWAY_EXPLAIN_REFRESH_S = 0  # prune every pass
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="one",
               pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}])
    reconcile_pass_run()
    job = Job.objects.get(name="one")
    assert job.state == "admitted" and job.explanation_key == "" and stored_explanation(job) == {}
    reconcile_pass_run()
    assert not Explanation.objects.exists()
