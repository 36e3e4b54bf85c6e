"""The pass writes a pending job's explanation only when it says something new, not as time passes."""

from __future__ import annotations

from scheduling.models import Job
from scheduling.services import admission_cycle_run, job_submit
from scheduling.services.explanations import explanation_fingerprint
from tests.conftest import H100


def test_a_fingerprint_ignores_the_gpu_hours_a_fix_would_cost_and_nothing_else():
    base = {"blocking": "quota", "summary": "waits", "fixes": [
        {"action": "preempt", "cost_gpu_hours": 1.5, "detail": "preempt #3 (vision, 8 GPUs, 1.5 GPU-h)"}]}
    later = {**base, "fixes": [{"action": "preempt", "cost_gpu_hours": 9.25, "detail": "preempt #3 (vision, 8 GPUs, 9.2 GPU-h)"}]}
    other = {**base, "summary": "waits for nodes"}
    assert explanation_fingerprint(base) == explanation_fingerprint(later)
    assert explanation_fingerprint(base) != explanation_fingerprint(other)


def test_a_later_pass_with_nothing_new_rewrites_no_explanation(org):
    for i in range(4):
        job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name=f"big{i}",
                   pod_sets=[{"name": "w", "count": 4, "gpus_per_pod": 8}], now=1000.0 + i)
    admission_cycle_run(now=2000.0)
    waiting = Job.objects.filter(state="pending")
    assert waiting.exists() and all(job.explanation and job.explanation_fingerprint for job in waiting)
    written_at = {job.pk: job.explanation["checked_at"] for job in waiting}
    admission_cycle_run(now=2600.0)  # ten minutes later: running jobs' cost grew, nothing else changed
    assert {job.pk: job.explanation["checked_at"] for job in Job.objects.filter(state="pending")} == written_at


def test_a_requeued_job_is_explained_afresh(org):
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="one",
               pod_sets=[{"name": "w", "count": 1, "gpus_per_pod": 8}])
    admission_cycle_run()
    job = Job.objects.get(name="one")
    assert job.state == "admitted" and job.explanation == {} and job.explanation_fingerprint == ""
