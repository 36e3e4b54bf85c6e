"""Waiting for a checkpoint before preempting (SchedulerConfig.preempt_at_checkpoints; by default for plans within the
gang's own queue) on the live pass: the fresh gang waits while its victims' work since their last checkpoint outweighs the wait, and the first pass
after their checkpoint preempts one that loses only its restart."""

from __future__ import annotations

import pytest

from scheduling.core.model import JobState
from scheduling.models import Job
from scheduling.services import reconcile_pass_run
from tests.services.test_reconcile import T0, state, submit

pytestmark = pytest.mark.django_db

CHECKPOINT_S = 1800


@pytest.fixture
def long_runners(org):
    """vision runs four 8-GPU jobs that checkpoint every 30 min, language four without: the 64-GPU fleet is full."""
    vision = [submit(org, name=f"vision-long-{i}", limit_s=100_000, checkpoint_interval_s=CHECKPOINT_S) for i in range(4)]
    for i in range(4):
        submit(org, user="language-researcher", queue="language-main", name=f"language-{i}", limit_s=100_000)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    assert {state(job) for job in vision} == {JobState.RUNNING}
    return vision, Job.objects.get(pk=vision[0].pk).started_at.timestamp()


@pytest.mark.parametrize(
    ("waits", "preempted_after_s"),
    [
        pytest.param(None, 10 * 60, id="by default it preempts at the victims' next checkpoint"),
        pytest.param("never", 0, id="with the policy off it preempts at once"),
    ],
)
def test_a_fresh_gang_preempts_a_long_runner_of_its_queue_at_its_next_checkpoint(org, long_runners, settings, waits,
                                                                                  preempted_after_s):
    if waits:
        settings.GANGWAY_SCHEDULER = {**(getattr(settings, "GANGWAY_SCHEDULER", {}) or {}), "preempt_at_checkpoints": waits}
    vision, started = long_runners
    arrives = started + 3 * 3600 + 20 * 60  # 20 min after the long runners' last checkpoint, 10 min before the next
    fresh = submit(org, name="vision-fresh", at=arrives, limit_s=600)
    for t in (arrives + 1, arrives + 300):
        reconcile_pass_run(now=t)
        if state(fresh) != JobState.PENDING:
            break
    assert (state(fresh) == JobState.PENDING) is bool(preempted_after_s)
    reconcile_pass_run(now=arrives + preempted_after_s + 1)
    assert state(fresh) in (JobState.ADMITTED, JobState.RUNNING)
    assert sum(state(job) == JobState.PENDING for job in vision) == 1


def test_the_waiting_gangs_page_says_its_preemption_waits_for_a_checkpoint(org, long_runners, client):
    """Not "runs automatically": the pass declined the plan, and the job's page gives the pass's reason."""
    _, started = long_runners
    arrives = started + 3 * 3600 + 20 * 60
    fresh = submit(org, name="vision-fresh", at=arrives, limit_s=600)
    reconcile_pass_run(now=arrives + 1)
    client.force_login(org["vision-researcher"])
    page = client.get(f"/jobs/{fresh.pk}/").content.decode()
    assert "Gangway could make room by preempting 1 job, but not now:" in page
    assert "not run now: preempting 1 job(s) now would lose" in page and "it waits about 10 min" in page
    assert "runs automatically" not in page and "sooner if the preemption below runs" not in page
