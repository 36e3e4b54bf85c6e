"""A preemption the cycle could make but declines (core.payoff) is offered as a fix that does not run now, with the
cycle's reason, never as one that "runs automatically"."""

from __future__ import annotations

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending
from scheduling.core.model import SchedulerConfig
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 100_000.0
TEN_HOURS = 10 * 3600


def a_full_queue(*running, pending=(), config=None):
    """One 8-GPU node per running job, all busy; the pending gangs (1 pod of 8 GPUs each) in the same queue."""
    nodes = rack_fleet(racks=1, nodes=len(running))
    admitted = [job.running_on(f"b0r0n{i}", since=job.build().started_at or 0.0) for i, job in enumerate(running)]
    return snapshot(nodes, [queue("q", 8 * len(running), cohort=None)], admitted=admitted,
                    pending=list(pending) or [a_gang(1, 8).id(1).submitted(NOW - 10)], now=NOW,
                    config=config or SchedulerConfig(approval_threshold_gpu_hours=1e9))


def a_victim(job_id, *, ran_s, checkpoint_s=None):
    return a_gang(1, 8).id(job_id).checkpointing(checkpoint_s).running_on("unset", since=NOW - ran_s)


def lent_out_to_a_young_run(ran_s):
    """Queue q's 8 GPUs are lent to team b, whose job started `ran_s` ago without checkpoints."""
    borrower = a_gang(1, 8).id(10).in_queue("b", team="tb").running_on("b0r0n0", since=NOW - ran_s)
    return snapshot(rack_fleet(racks=1, nodes=1), [queue("q", 8, team="tq"), queue("b", 0, team="tb")],
                    admitted=[borrower], pending=[a_gang(1, 8).id(1).in_queue("q", team="tq").submitted(NOW - 10)],
                    now=NOW, config=SchedulerConfig(approval_threshold_gpu_hours=1e9))


def preempt_fix(explanation):
    return next(f for f in explanation.fixes if f.action == "preempt")


@pytest.mark.parametrize(
    "snap, reason",
    [
        pytest.param(a_full_queue(a_victim(10, ran_s=3600 + 1700, checkpoint_s=1800)),
                     "preempting 1 job(s) would lose 4.4 GPU-hours to spare it about 11.8: it does not pay",
                     id="a plan whose lost work exceeds the waiting it spares does not pay"),
        pytest.param(lent_out_to_a_young_run(ran_s=120),
                     "enough GPUs should come back on their own within about 2 min: preempting would not pay",
                     id="a plan against young runs without checkpoints is not worth making"),
        pytest.param(a_full_queue(a_victim(10, ran_s=TEN_HOURS + 20 * 60, checkpoint_s=1800),
                                  config=SchedulerConfig(approval_threshold_gpu_hours=1e9)),
                     "preempting 1 job(s) now would lose 3.3 GPU-hours, mostly work since their last checkpoint: it "
                     "waits about 10 min, until a job it may preempt checkpoints",
                     id="a paying plan within the gang's queue waits for its victim's checkpoint"),
    ],
)
def test_a_declined_preemption_says_why_it_does_not_run(snap, reason):
    result = run_admission_cycle(snap)
    assert result.admissions == () and result.declined == {1: reason}
    explanation = explain_pending(snap, result).by_job[1]
    fix = preempt_fix(explanation)
    assert fix.declined == reason
    assert fix.detail.endswith(f"; not run now: {reason}") and "runs automatically" not in fix.detail
    assert explanation.headline.endswith(f"Gangway could make room by preempting 1 job, but not now: {reason}.")
    assert fix.to_dict()["declined"] == reason


def test_a_plan_that_pays_runs_and_declines_nothing():
    snap = a_full_queue(a_victim(10, ran_s=TEN_HOURS, checkpoint_s=1800))
    result = run_admission_cycle(snap)
    assert [a.job_id for a in result.admissions] == [1] and result.declined == {}


def test_the_jobs_queued_behind_a_declined_head_of_their_shape_get_the_same_answer():
    """Only a queue's head may preempt in a cycle; the one behind it would meet the same rule at the head."""
    behind = a_gang(1, 8).id(2).submitted(NOW - 5)
    snap = a_full_queue(a_victim(10, ran_s=3600 + 1700, checkpoint_s=1800),
                        pending=[a_gang(1, 8).id(1).submitted(NOW - 10), behind])
    result = run_admission_cycle(snap)
    assert set(result.declined) == {1}
    explained = explain_pending(snap, result).by_job
    assert preempt_fix(explained[2]).declined == preempt_fix(explained[1]).declined != ""


def test_a_preemption_the_cycle_did_not_weigh_still_runs_automatically():
    """A gang of a higher priority preempts by the users' stated intent: the payoff rule does not apply."""
    urgent = a_gang(1, 8).id(1).priority(5).submitted(NOW - 10)
    busy_twice = a_full_queue(a_victim(10, ran_s=60), a_victim(11, ran_s=60),
                              pending=[urgent, a_gang(1, 8).id(2).priority(5).submitted(NOW - 5),
                                       a_gang(1, 8).id(3).priority(5).submitted(NOW - 1)])
    result = run_admission_cycle(busy_twice)
    assert result.declined == {}
    explained = explain_pending(busy_twice, result).by_job
    fix = preempt_fix(explained[3])
    assert fix.declined == "" and fix.detail.endswith("; runs automatically")
    assert "preempting 1 lower-priority job of its queue:" in fix.detail and fix.victims[0].rule == "within_queue"


def test_a_victim_of_its_own_queue_and_priority_is_said_to_have_run_a_level_longer_not_to_rank_lower():
    snap = a_full_queue(a_victim(10, ran_s=3600 + 1700, checkpoint_s=1800))
    fix = preempt_fix(explain_pending(snap, run_admission_cycle(snap)).by_job[1])
    assert fix.victims[0].rule == "attained_service"
    assert "preempting 1 job of its queue that ran a whole service level longer:" in fix.detail
