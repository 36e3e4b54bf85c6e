"""Preemption plans: candidates by policy, displacement cost, one domain, approval, no ping-pong."""

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import JobState, PendingReason, PreemptionPolicy, SchedulerConfig
from scheduling.core.preemption import displacement_cost_gpu_hours
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0
CHEAP = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=1e9, preempt_only_when_it_pays=False)  # victim choice, not its value


def run(nodes, queues, admitted, pending, config=CHEAP, **extra):
    return run_admission_cycle(snapshot(nodes, queues, admitted=admitted, pending=pending, now=NOW, config=config, **extra))


def test_cost_is_work_since_the_last_checkpoint_plus_restart():
    job = a_gang(2, 8).running_on("a", "b", since=NOW - 5400).checkpoints_every(3600).build()
    assert displacement_cost_gpu_hours(job, NOW, restart_overhead_s=0) == pytest.approx(16 * 0.5)
    assert displacement_cost_gpu_hours(job, NOW, restart_overhead_s=1800) == pytest.approx(16 * 1.0)
    never_checkpoints = replace(job, checkpoint_interval_s=None)
    assert displacement_cost_gpu_hours(never_checkpoints, NOW, restart_overhead_s=0) == pytest.approx(16 * 1.5)


def test_a_higher_priority_job_preempts_the_cheapest_lower_priority_victim():
    nodes = rack_fleet(racks=1, nodes=2)
    fresh = a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 60)
    old = a_gang(1, 8).id(2).running_on("b0r0n1", since=NOW - 7200)
    urgent = a_gang(1, 8).id(3).priority(10)
    result = run(nodes, [queue("q", 16)], [fresh, old], [urgent])
    assert [a.job_id for a in result.admissions] == [3]
    assert result.admissions[0].preempted == (1,)
    assert result.admissions[0].placement[0].node == "b0r0n0"


CANDIDATES = [
    pytest.param(dict(priority=10), True, id="a lower priority job of the same queue is a candidate"),
    pytest.param(dict(priority=0), False, id="an equal priority job is never a candidate"),
    pytest.param(dict(priority=10, preemptible=False), False, id="a non-preemptible job is never a candidate"),
    pytest.param(dict(priority=10, policy=PreemptionPolicy.NEVER), False, id="a queue whose policy is never does not preempt"),
]


@pytest.mark.parametrize("case, preempts", CANDIDATES)
def test_within_queue_candidates(case, preempts):
    nodes = rack_fleet(racks=1, nodes=1)
    victim = a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 60)
    if case.get("preemptible") is False:
        victim = victim.not_preemptible()
    policy = case.get("policy", PreemptionPolicy.WITHIN_QUEUE)
    result = run(nodes, [queue("q", 8, preemption=policy)], [victim], [a_gang(1, 8).id(2).priority(case["priority"])])
    assert bool(result.admissions) is preempts


def test_reclaiming_nominal_quota_preempts_a_borrower_in_the_cohort():
    nodes = rack_fleet(racks=1, nodes=4)
    borrower = [a_gang(1, 8).id(i).in_queue("a", team="t").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(4)]
    owner = a_gang(1, 8).id(9).in_queue("b", team="t")
    result = run(nodes, [queue("a", 16, team="t"), queue("b", 16, team="t")], borrower, [owner])
    assert result.admissions and result.admissions[0].job_id == 9
    assert len(result.admissions[0].preempted) == 1


def test_a_job_that_would_itself_borrow_does_not_reclaim():
    nodes = rack_fleet(racks=1, nodes=4)
    borrower = [a_gang(1, 8).id(i).in_queue("a").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(4)]
    greedy = a_gang(3, 8).id(9).in_queue("b")
    result = run(nodes, [queue("a", 16), queue("b", 16)], borrower, [greedy])
    assert result.admissions == ()


def test_victims_are_chosen_inside_one_domain_the_gang_can_use():
    # Two racks, each with one cheap and one expensive victim. A 2-node gang that requires a rack
    # must take both victims of one rack, never the two cheap ones on different racks.
    nodes = rack_fleet(racks=2, nodes=2)
    victims = [
        a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 60),
        a_gang(1, 8).id(2).running_on("b0r0n1", since=NOW - 7200),
        a_gang(1, 8).id(3).running_on("b0r1n0", since=NOW - 120),
        a_gang(1, 8).id(4).running_on("b0r1n1", since=NOW - 9000),
    ]
    gang = a_gang(2, 8).id(9).priority(5).requires("rack")
    result = run(nodes, [queue("q", 32)], victims, [gang])
    (admission,) = result.admissions
    assert sorted(admission.preempted) == [1, 2]
    assert {p.node for p in admission.placement} == {"b0r0n0", "b0r0n1"}


def test_unnecessary_victims_are_dropped():
    nodes = rack_fleet(racks=1, nodes=2)
    cheap_half = a_gang(1, 4).id(1).running_on("b0r0n0", since=NOW - 10)
    costly_half = a_gang(1, 4).id(3).running_on("b0r0n0", since=NOW - 1000)
    whole = a_gang(1, 8).id(2).running_on("b0r0n1", since=NOW - 20)
    gang = a_gang(1, 8).id(9).priority(5)
    result = run(nodes, [queue("q", 16)], [cheap_half, costly_half, whole], [gang])
    (admission,) = result.admissions
    # Job 1 is taken first (cheapest) but frees only half a node; job 2 frees a whole one, so 1 is dropped.
    assert admission.preempted == (2,)


def test_a_plan_that_hits_another_team_waits_for_approval():
    nodes = rack_fleet(racks=1, nodes=2)
    borrowers = [a_gang(1, 8).id(i).in_queue("a").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(2)]
    owner = a_gang(1, 8).id(9).in_queue("b")
    result = run(nodes, [queue("a", 0), queue("b", 16)], borrowers, [owner])
    assert result.admissions == ()
    (planned,) = result.preemptions
    assert planned.needs_approval and planned.plan.teams_affected == ("a",)
    assert {p.job_id: p.reason for p in result.pending} == {9: PendingReason.AWAITING_APPROVAL}


def test_an_approved_plan_executes():
    nodes = rack_fleet(racks=1, nodes=2)
    borrowers = [a_gang(1, 8).id(i).in_queue("a").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(2)]
    owner = a_gang(1, 8).id(9).in_queue("b")
    first = run(nodes, [queue("a", 0), queue("b", 16)], borrowers, [owner])
    victims = first.preemptions[0].plan.victim_ids
    result = run(nodes, [queue("a", 0), queue("b", 16)], borrowers, [owner], approved_preemptions={9: victims})
    assert result.admissions[0].preempted == tuple(sorted(victims))


def test_cross_team_approval_can_be_waived_by_configuration():
    config = replace(CHEAP, cross_team_needs_approval=False)
    nodes = rack_fleet(racks=1, nodes=2)
    borrowers = [a_gang(1, 8).id(i).in_queue("a").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(2)]
    result = run(nodes, [queue("a", 0), queue("b", 16)], borrowers, [a_gang(1, 8).id(9).in_queue("b")], config=config)
    assert [a.job_id for a in result.admissions] == [9]


def test_a_costly_plan_inside_one_team_waits_for_approval():
    config = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=1.0, preempt_only_when_it_pays=False)
    nodes = rack_fleet(racks=1, nodes=1)
    victim = a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 3600)
    result = run(nodes, [queue("q", 8)], [victim], [a_gang(1, 8).id(2).priority(5)], config=config)
    assert result.admissions == () and result.preemptions[0].needs_approval


def test_a_victim_cannot_preempt_its_preemptor_in_the_next_pass():
    nodes = rack_fleet(racks=1, nodes=1)
    victim = a_gang(1, 8).id(1).priority(0)
    winner = a_gang(1, 8).id(2).priority(5).running_on("b0r0n0", since=NOW - 10)
    requeued = replace(victim.build(), priority=10, preempted_by=2, state=JobState.PENDING)
    result = run(nodes, [queue("q", 8)], [winner], [requeued])
    assert result.admissions == ()


def test_a_job_admitted_this_cycle_is_never_a_victim():
    nodes = rack_fleet(racks=1, nodes=1)
    first = a_gang(1, 8).id(1).priority(1).submitted(1)
    second = a_gang(1, 8).id(2).priority(0).submitted(2)
    result = run(nodes, [queue("q", 8)], [], [first, second])
    assert [a.job_id for a in result.admissions] == [1]
