"""Victim choice follows Kueue's candidate order, displacement cost only breaking ties, in one plan.

The scenarios paraphrase Kueue's own preemption test tables: one queue or a cohort, whole-node
pods, priorities low / mid / high. Each runs one admission cycle and compares the victims of the one
plan it makes (None: no plan at all).
"""

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import victim_rules
from scheduling.core.explain.facts import VictimFacts, VictimRule
from scheduling.core.model import JobState, SchedulerConfig
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0
LOW, MID, HIGH = 0, 5, 10
EXECUTES = SchedulerConfig(
    restart_overhead_s=0, approval_threshold_gpu_hours=1e9, cross_team_needs_approval=False, preempt_only_when_it_pays=False
)


def on(node: int, job_id: int, priority: int, *, queue_name: str = "q", since_s: float = 60, gpus: int = 8):
    """A running job of `gpus` GPUs on node b0r0n{node}, started `since_s` ago."""
    return a_gang(1, gpus).id(job_id).in_queue(queue_name).priority(priority).running_on(f"b0r0n{node}", since=NOW - since_s)


def victims(nodes: int, queues, running, pending, config=EXECUTES):
    result = run_admission_cycle(
        snapshot(rack_fleet(racks=1, nodes=nodes), queues, admitted=running, pending=pending, now=NOW, config=config)
    )
    plans = [p.plan for p in result.preemptions]
    assert len(plans) <= 1
    return tuple(sorted(plans[0].victim_ids)) if plans else None


WITHIN_QUEUE = [
    pytest.param(
        3, [on(0, 1, LOW, since_s=7200), on(1, 2, MID), on(2, 3, HIGH)], a_gang(1, 8).id(9).priority(HIGH), (1,),
        id="a high-priority job preempts the low-priority job, not the cheaper mid-priority one",
    ),
    pytest.param(
        2, [on(0, 1, LOW, since_s=7200), on(1, 2, LOW, since_s=60)], a_gang(1, 8).id(9).priority(HIGH), (2,),
        id="among equal priorities the cheapest displacement goes first",
    ),
    pytest.param(
        2,
        [on(0, 1, LOW, since_s=7200).checkpoints_every(3600), on(1, 2, LOW, since_s=3600).checkpoints_every(3600)],
        a_gang(1, 8).id(9).priority(HIGH), (2,),
        id="among equal priorities and costs the most recently started goes first",
    ),
    pytest.param(
        1, [on(0, 1, HIGH)], a_gang(1, 8).id(9).priority(HIGH), None,
        id="a job of equal priority is never preempted",
    ),
    pytest.param(
        2, [on(0, 1, LOW), on(1, 2, HIGH)], a_gang(2, 8).id(9).priority(MID), None,
        id="not enough lower-priority jobs makes no plan at all",
    ),
    pytest.param(
        2, [on(0, 1, LOW, gpus=4), on(0, 2, HIGH, gpus=4), on(1, 3, MID)], a_gang(1, 8).id(9).priority(HIGH), (3,),
        id="the minimal set leaves out a low-priority job it does not need",
    ),
    pytest.param(
        3, [on(0, 1, LOW), on(1, 2, LOW), on(2, 3, MID)], a_gang(2, 8).id(9).priority(HIGH), (1, 2),
        id="a gang of two nodes preempts the two lowest-priority jobs",
    ),
]


@pytest.mark.parametrize("nodes, running, pending, expected", WITHIN_QUEUE)
def test_within_a_queue(nodes, running, pending, expected):
    assert victims(nodes, [queue("q", 8 * nodes)], running, [pending]) == expected


# The owner's queue lends its nominal quota to borrowers of the cohort (queues with nominal 0).
RECLAIM = [
    pytest.param(
        [queue("owner", 16), queue("a", 0)],
        [on(0, 1, HIGH, queue_name="a", since_s=60), on(1, 2, LOW, queue_name="a", since_s=7200)],
        a_gang(1, 8).id(9).in_queue("owner"), (2,),
        id="reclaiming from two equal borrowers takes the lower priority one though it costs more",
    ),
    pytest.param(
        [queue("owner", 8), queue("a", 0)],
        [on(0, 1, HIGH + 100, queue_name="a")],
        a_gang(1, 8).id(9).in_queue("owner").priority(LOW), (1,),
        id="reclaim takes a borrower of any priority, even above the preemptor's",
    ),
    pytest.param(
        [queue("owner", 24), queue("a", 0), queue("b", 0)],
        [on(0, 1, LOW, queue_name="a", since_s=10), on(1, 2, MID, queue_name="b"), on(2, 3, MID, queue_name="b", since_s=30)],
        a_gang(1, 8).id(9).in_queue("owner"), (3,),
        id="reclaim starts with the queue most over its nominal quota",
    ),
    pytest.param(
        [queue("owner", 16), queue("a", 0)],
        [on(0, 1, LOW, queue_name="a"), on(1, 2, LOW, queue_name="owner", since_s=10)],
        a_gang(1, 8).id(9).in_queue("owner").priority(HIGH), (1,),
        id="a job within its nominal quota reclaims before it preempts its own queue",
    ),
    pytest.param(
        [queue("owner", 16), queue("a", 0)],
        [on(0, 1, LOW, queue_name="owner"), on(1, 2, LOW, queue_name="a")],
        a_gang(2, 8).id(9).in_queue("owner").priority(HIGH), (1, 2),
        id="one plan preempts a lower-priority job of its queue and reclaims from a borrower when neither alone makes room",
    ),
    pytest.param(
        [queue("owner", 16), queue("a", 0)],
        [on(0, 1, LOW, queue_name="owner"), on(1, 2, LOW, queue_name="a")],
        a_gang(2, 8).id(9).in_queue("owner").priority(LOW), None,
        id="without a lower-priority job of its own queue to make it fit its nominal quota, it reclaims nothing",
    ),
]


@pytest.mark.parametrize("queues, running, pending, expected", RECLAIM)
def test_reclaiming_in_the_cohort(queues, running, pending, expected):
    assert victims(3, queues, running, [pending]) == expected


def test_a_rack_whose_first_victims_looked_dearer_wins_when_its_minimal_set_is_cheaper():
    # Rack r0 holds one victim costing 2.0 GPU-hours; rack r1's first victims in order cost 0.9 + 1.5, so r0 is
    # planned first. r1's last needed victim (1.5) is cheaper than r0's plan, so r1's minimal set is still worked
    # out: the 4-GPU victim frees no whole node and goes back, and r1's plan of 1.5 wins.
    def low(job_id, node, gpus, cost_gpu_hours):
        return a_gang(1, gpus).id(job_id).in_queue("q").priority(LOW).running_on(
            node, since=NOW - cost_gpu_hours * 3600 / gpus)

    running = [
        low(1, "b0r0n0", 8, 2.0),
        a_gang(1, 8).id(4).in_queue("q").priority(HIGH).running_on("b0r0n1", since=NOW),
        low(2, "b0r1n0", 4, 0.9),
        a_gang(1, 4).id(5).in_queue("q").priority(HIGH).running_on("b0r1n0", since=NOW),
        low(3, "b0r1n1", 8, 1.5),
    ]
    result = run_admission_cycle(snapshot(rack_fleet(racks=2, nodes=2), [queue("q", 64)], admitted=running,
                                          pending=[a_gang(1, 8).id(9).in_queue("q").priority(HIGH)], now=NOW,
                                          config=EXECUTES))
    [admission] = result.admissions
    assert admission.preempted == (3,) and {p.node for p in admission.placement} == {"b0r1n1"}


def test_the_mixed_plan_runs_in_one_pass_and_leaves_the_job_within_nominal():
    running = [on(0, 1, LOW, queue_name="owner"), on(1, 2, LOW, queue_name="a")]
    result = run_admission_cycle(snapshot(
        rack_fleet(racks=1, nodes=2), [queue("owner", 16), queue("a", 0)], admitted=running,
        pending=[a_gang(2, 8).id(9).in_queue("owner").priority(HIGH)], now=NOW, config=EXECUTES,
    ))
    (admission,) = result.admissions
    assert (admission.job_id, admission.preempted, admission.is_borrowing) == (9, (1, 2), False)


def test_one_pass_preempts_the_low_priority_job_where_cost_order_cascaded_through_the_mid_one():
    """The issue's first behaviour: the old cost order took `mid`, which on requeue took `low`. Now one
    pass takes `low`, and the requeued `low` has no lower-priority job to take in the next pass."""
    nodes = rack_fleet(racks=1, nodes=3)
    low, mid, high = on(0, 1, LOW, since_s=7200), on(1, 2, MID, since_s=60), on(2, 3, HIGH, since_s=60)
    urgent = a_gang(1, 8).id(9).priority(HIGH)
    first = run_admission_cycle(snapshot(nodes, [queue("q", 24)], admitted=[low, mid, high], pending=[urgent], now=NOW, config=EXECUTES))
    assert [(a.job_id, a.preempted) for a in first.admissions] == [(9, (1,))]
    admitted = first.admissions[0]
    now_running = [mid, high, replace(urgent.build(), placement=admitted.placement, started_at=NOW)]
    requeued = replace(low.build(), state=JobState.PENDING, placement=(), started_at=None, preempted_by=9)
    second = run_admission_cycle(snapshot(nodes, [queue("q", 24)], admitted=now_running, pending=[requeued], now=NOW + 60, config=EXECUTES))
    assert (second.admissions, second.preemptions) == ((), ())


def chosen(*victims):
    """The victims of a plan for a job of queue `owner`, as (queue, gpus, rule); an idle one idle since 02:00 UTC."""
    return tuple(VictimFacts(i, q, q, gpus, rule, 0.0, 0.0, 7200.0 if rule == VictimRule.IDLE else None)
                 for i, (q, gpus, rule) in enumerate(victims, 1))


OWN, LENT, IDLE = VictimRule.WITHIN_QUEUE, VictimRule.RECLAIM, VictimRule.IDLE


@pytest.mark.parametrize("victims, says", [
    pytest.param(chosen(("owner", 8, OWN)), "preempting 1 lower-priority job of its queue", id="one victim of its own queue"),
    pytest.param(chosen(("speech", 8, LENT), ("speech", 8, LENT)), "reclaiming 16 GPUs lent to speech", id="two victims of a borrower"),
    pytest.param(
        chosen(("owner", 8, OWN), ("owner", 4, OWN), ("speech", 16, LENT), ("audio", 8, LENT)),
        "preempting 2 lower-priority jobs of its queue and reclaiming 8 GPUs lent to audio, 16 GPUs lent to speech",
        id="a mixed plan names both rules",
    ),
    pytest.param(
        chosen(("speech", 8, IDLE), ("owner", 8, OWN), ("speech", 8, LENT)),
        "taking 1 idle job of team speech (idle since 02:00 UTC), preempting 1 lower-priority job of its queue and "
        "reclaiming 8 GPUs lent to speech",
        id="an idle victim is named first, with its team and since when, though its queue borrows",
    ),
])
def test_the_why_pending_explanation_says_which_rule_chose_the_victims(victims, says):
    assert victim_rules(victims, NOW) == says
