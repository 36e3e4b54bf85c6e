"""A job that ran before goes back to the first attained-service level once it has waited long enough
(SchedulerConfig.promote_after_waiting, an admin's option, core.attained.ServiceOrder): Tiresias' starvation limit."""

from __future__ import annotations

import pytest

from scheduling.core.attained import ServiceOrder, served_longer
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending
from scheduling.core.fairshare import sort_queue
from scheduling.core.model import SchedulerConfig
from scheduling.core.policy import policy_in_force
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

LEVELS = (2.0, 32.0)
PROMOTING = SchedulerConfig(promote_after_waiting=4.0)
RAN_S = 9_000.0
"""An 8-GPU job that ran this long attained 20 GPU-hours: level 1."""


def ran_before(job_id: int = 1, *, submitted: float = 0.0, gpus: int = 8):
    return a_gang(1, gpus).id(job_id).submitted(submitted).ran_before(RAN_S * gpus).build()


@pytest.mark.parametrize(
    "ratio, pending_s, promoted",
    [
        pytest.param(0.5, 4_499.0, False, id="a job pending less than half its run stays at its level"),
        pytest.param(0.5, 4_500.0, True, id="a job pending half as long as it ran goes back to the first level"),
        pytest.param(2.0, 17_999.0, False, id="a larger ratio asks for a longer wait"),
        pytest.param(2.0, 18_000.0, True, id="a job pending twice its run at ratio 2 goes back"),
        pytest.param(None, 10**7, False, id="without a ratio no job is ever promoted"),
    ],
)
def test_promotion_comes_after_the_configured_multiple_of_the_run(ratio, pending_s, promoted):
    service = ServiceOrder(LEVELS, ratio, now=RAN_S + pending_s)
    job = ran_before()
    assert service.is_promoted(job) is promoted
    assert service.pending_level(job) == (0 if promoted else 1)


def test_the_run_is_counted_per_gpu_so_a_wide_gang_is_not_promoted_sooner():
    """64 GPUs × 9,000 s is 160 GPU-hours: the same 9,000 s run, so the same 4,500 s wait."""
    wide = ran_before(gpus=64)
    assert not ServiceOrder(LEVELS, 0.5, now=RAN_S + 4_000).is_promoted(wide)
    assert ServiceOrder(LEVELS, 0.5, now=RAN_S + 4_500).is_promoted(wide)


def test_a_fresh_job_is_never_promoted_and_stays_at_the_first_level():
    fresh = a_gang(1, 8).id(2).build()
    service = ServiceOrder(LEVELS, 0.5, now=10**7)
    assert not service.is_promoted(fresh)
    assert service.pending_level(fresh) == 0


def test_a_promoted_job_goes_back_in_line_by_its_submit_time():
    older_fresh = a_gang(1, 8).id(2).submitted(-10.0).build()
    ran = ran_before(1, submitted=0.0)
    newer_fresh = a_gang(1, 8).id(3).submitted(RAN_S + 100).build()
    waiting = [newer_fresh, ran, older_fresh]
    sort_queue(waiting, ServiceOrder(LEVELS, 0.5, now=RAN_S + 1_000))
    assert [job.id for job in waiting] == [2, 3, 1], "not yet promoted: behind every fresh job"
    sort_queue(waiting, ServiceOrder(LEVELS, 0.5, now=RAN_S + 5_000))
    assert [job.id for job in waiting] == [2, 1, 3], "promoted: ahead of the job submitted after it"


def test_promotion_does_not_change_whom_the_job_may_preempt():
    """Preemption for attained service still compares the service attained: a promoted level-1 job does not make a
    level-1 job of its queue a victim, though it now ranks with the fresh jobs."""
    now = RAN_S + 100_000
    promoted = ran_before(1)
    running = a_gang(1, 8).id(9).checkpointing(1800).ran_before(0.0).running_on("b0r0n0", since=now - 3 * 3600).build()
    assert ServiceOrder(LEVELS, 0.5, now=now).is_promoted(promoted)
    assert not served_longer(running, promoted, now, LEVELS)


def test_the_cycle_admits_a_promoted_job_before_the_fresh_jobs_submitted_after_it():
    nodes = rack_fleet(racks=1, nodes=1)
    now = RAN_S + 50_000
    ran = a_gang(1, 8).id(1).submitted(0.0).ran_before(RAN_S * 8)
    fresh = a_gang(1, 8).id(2).submitted(now - 60)
    for config, admitted in ((PROMOTING, 1), (SchedulerConfig(), 2)):
        result = run_admission_cycle(snapshot(nodes, [queue("q", 8, cohort=None)], pending=[fresh, ran], now=now,
                                              config=config))
        assert [a.job_id for a in result.admissions] == [admitted]


def test_the_explanation_says_a_promoted_job_is_back_in_line_with_the_fresh_jobs():
    nodes = rack_fleet(racks=1, nodes=1)
    now = RAN_S + 50_000
    busy = a_gang(1, 8).id(9).checkpointing(None).running_on("b0r0n0", since=now - 60)
    ran = a_gang(1, 8).id(1).submitted(0.0).ran_before(RAN_S * 8)
    fresh = a_gang(1, 8).id(2).submitted(now - 60)
    snap = snapshot(nodes, [queue("q", 8, cohort=None)], admitted=[busy], pending=[ran, fresh], now=now,
                    config=PROMOTING)
    explanations = explain_pending(snap, run_admission_cycle(snap))
    assert "back at the first attained-service level" in explanations.by_job[1].summary
    assert explanations.position[1] == 0
    assert explanations.by_job[2].attained_service == ""


@pytest.mark.parametrize(
    "config, says",
    [
        pytest.param(PROMOTING, "goes back to the first level once it has waited 4× as long as it ran",
                     id="an admin's promotion is named with its ratio"),
        pytest.param(SchedulerConfig(), None, id="by default there is no promotion to name"),
    ],
)
def test_the_policy_in_force_names_the_promotion(config, says):
    order = policy_in_force(config)["order"]
    if says is None:
        assert "goes back to the first level" not in order
    else:
        assert says in order
