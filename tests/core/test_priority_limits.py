"""A priority class's cap on the GPUs each team may run at it, enforced by the admission cycle."""

from __future__ import annotations

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending
from scheduling.core.model import PendingReason
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NODES = rack_fleet(racks=2, nodes=4)  # 64 GPUs
CAPS = {"high": 16}


def vision_running_at(priority_class: str | None, gpus_nodes: list[str]):
    gang = a_gang(len(gpus_nodes), 8).id(1).in_queue("vision").running_on(*gpus_nodes)
    return gang.at_class(priority_class) if priority_class else gang


CASES = [
    pytest.param(None, "high", 8, "vision", True, id="a job within its class's cap starts"),
    pytest.param(["b0r0n0"], "high", 8, "vision", True, id="a job that reaches the cap exactly starts"),
    pytest.param(["b0r0n0"], "high", 16, "vision", False, id="a job that would take its team over the cap waits"),
    pytest.param(["b0r0n0", "b0r0n1"], "high", 8, "language", True, id="another team's GPUs at the class do not count"),
    pytest.param(["b0r0n0", "b0r0n1"], "normal", 8, "vision", True, id="a class without a cap is not limited"),
    pytest.param(["b0r0n0", "b0r0n1"], None, 8, "vision", True, id="a job without a class is not limited"),
]


@pytest.mark.parametrize("running_nodes, job_class, job_gpus, team, is_admitted", CASES)
def test_the_cap_on_gpus_running_at_a_class(running_nodes, job_class, job_gpus, team, is_admitted):
    admitted = [vision_running_at("high", running_nodes)] if running_nodes else []
    job = a_gang(job_gpus // 8, 8).id(2).in_queue(team)
    if job_class:
        job = job.at_class(job_class)
    queues = [queue("vision", 32), queue("language", 32)]
    result = run_admission_cycle(snapshot(NODES, queues, pending=[job], admitted=admitted, priority_class_caps=CAPS))
    assert ([a.job_id for a in result.admissions] == [2]) is is_admitted
    if not is_admitted:
        (pending,) = result.pending
        assert pending.reason is PendingReason.PRIORITY_CLASS
        assert pending.message.startswith("priority class high: team vision runs 8 of its 16 GPUs at high")


def test_two_jobs_of_one_cycle_share_the_cap_and_the_second_waits():
    first, second = a_gang(2, 8).id(1).in_queue("vision").at_class("high"), a_gang(1, 8).id(2).in_queue("vision").at_class("high")
    result = run_admission_cycle(snapshot(NODES, [queue("vision", 64)], pending=[first, second], priority_class_caps=CAPS))
    assert [a.job_id for a in result.admissions] == [1]
    assert [(p.job_id, p.reason) for p in result.pending] == [(2, PendingReason.PRIORITY_CLASS)]


def test_a_job_over_the_cap_waits_without_preempting_and_lets_a_lower_class_job_pass():
    running = vision_running_at("high", ["b0r0n0", "b0r0n1"])
    capped = a_gang(1, 8).id(2).in_queue("vision").at_class("high").priority(10).submitted(1)
    normal = a_gang(1, 8).id(3).in_queue("vision").submitted(2)
    result = run_admission_cycle(snapshot(NODES, [queue("vision", 64)], pending=[capped, normal], admitted=[running],
                                          priority_class_caps=CAPS))
    assert [a.job_id for a in result.admissions] == [3]
    assert result.preemptions == ()


def test_a_job_larger_than_the_cap_is_told_it_can_never_start_at_that_class():
    job = a_gang(3, 8).id(2).in_queue("vision").at_class("high")
    result = run_admission_cycle(snapshot(NODES, [queue("vision", 64)], pending=[job], priority_class_caps=CAPS))
    assert "this job needs 24, more than the cap: it can never start at high" in result.pending[0].message


def test_the_explanation_names_the_class_cap_as_what_blocks():
    running = vision_running_at("high", ["b0r0n0", "b0r0n1"])
    job = a_gang(1, 8).id(2).in_queue("vision").at_class("high")
    shot = snapshot(NODES, [queue("vision", 64)], pending=[job], admitted=[running], priority_class_caps=CAPS)
    explanation = explain_pending(shot, run_admission_cycle(shot)).by_job[2]
    assert explanation.blocking == "priority_class"
    assert explanation.summary.startswith("priority class high: team vision runs 16 of its 16 GPUs at high")
    assert [fix.action for fix in explanation.fixes] == ["wait", "lower_class"]


def test_a_victim_preempted_at_the_class_gives_its_gpus_at_that_class_back_within_the_cycle():
    nodes = rack_fleet(racks=1, nodes=2)  # 16 GPUs, both held by vision's two jobs at high
    running = [a_gang(1, 8).id(i).in_queue("vision").at_class("high").priority(10).running_on(n) for i, n in ((1, "b0r0n0"), (2, "b0r0n1"))]
    urgent = a_gang(1, 8).id(3).in_queue("vision").priority(50).submitted(1)
    another_high = a_gang(1, 8).id(4).in_queue("vision").at_class("high").priority(10).submitted(2)
    result = run_admission_cycle(snapshot(nodes, [queue("vision", 64)], pending=[urgent, another_high], admitted=running,
                                          priority_class_caps=CAPS))
    assert [a.job_id for a in result.admissions] == [3] and len(result.admissions[0].preempted) == 1
    assert [(p.job_id, p.reason) for p in result.pending] == [(4, PendingReason.FIT)], "8 of 16 at high after the preemption"
