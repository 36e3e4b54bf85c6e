"""The admission cycle: ordering, strategies, fair share, readiness, and reasons."""

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage
from scheduling.core.model import PendingReason, QueueingStrategy, SchedulerConfig
from scheduling.core.readiness import backoff_s
from tests.core.builders import a_gang, queue, rack_fleet, snapshot


def admitted_ids(result):
    return [a.job_id for a in result.admissions]


def reasons(result):
    return {p.job_id: p.reason for p in result.pending}


def test_higher_priority_goes_first_then_fifo():
    nodes = rack_fleet(racks=1, nodes=1)
    old = a_gang(1, 8).id(1).submitted(1)
    new_urgent = a_gang(1, 8).id(2).submitted(2).priority(10)
    newer = a_gang(1, 8).id(3).submitted(3)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 8)], pending=[old, newer, new_urgent]))
    assert admitted_ids(result) == [2]
    result = run_admission_cycle(snapshot(nodes, [queue("q", 8)], pending=[newer, old]))
    assert admitted_ids(result) == [1]


STILL_FRESH = 600.0
"""A `now` at which jobs submitted at t≈1 have waited less than the starvation threshold."""

STRATEGIES = [
    pytest.param(QueueingStrategy.BEST_EFFORT_FIFO, [2], PendingReason.FIT, id="best-effort FIFO lets a later job that fits pass a blocked head"),
    pytest.param(QueueingStrategy.STRICT_FIFO, [], PendingReason.ORDER, id="strict FIFO holds every job behind a blocked head"),
]


@pytest.mark.parametrize("strategy, admitted, second_reason", STRATEGIES)
def test_queueing_strategy(strategy, admitted, second_reason):
    nodes = rack_fleet(racks=1, nodes=2)
    head = a_gang(4, 8).id(1).submitted(1)
    small = a_gang(1, 8).id(2).submitted(2)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 64, strategy=strategy)], pending=[head, small], now=STILL_FRESH))
    assert admitted_ids(result) == admitted
    assert reasons(result)[1] is PendingReason.FIT
    if not admitted:
        assert reasons(result)[2] is second_reason


def test_a_gang_that_does_not_fit_waits_while_smaller_jobs_run():
    nodes = rack_fleet(racks=2, nodes=2)
    big = a_gang(8, 8).id(1).submitted(1)
    smalls = [a_gang(1, 8).id(i).submitted(i) for i in (2, 3)]
    result = run_admission_cycle(snapshot(nodes, [queue("q", 64)], pending=[big, *smalls], now=STILL_FRESH))
    assert admitted_ids(result) == [2, 3]
    assert reasons(result) == {1: PendingReason.FIT}


# The reservation rule alone (no attained-service preemption, which would let the head in by a plan).
RESERVING = SchedulerConfig(starvation_after_s=3600.0, service_levels_gpu_h=())

STARVATION = [
    pytest.param(a_gang(4, 8), RESERVING, [], PendingReason.ORDER,
                 id="a head that waited past the threshold and fits its nominal quota stops later jobs passing it"),
    pytest.param(a_gang(4, 8), SchedulerConfig(starvation_after_s=None), [2], PendingReason.QUOTA,
                 id="with the threshold off, a starving head is passed as in plain best-effort FIFO"),
    pytest.param(a_gang(9, 8), RESERVING, [2], PendingReason.QUOTA,
                 id="a head larger than its queue's nominal quota gets no reservation: it can only ever borrow"),
]


@pytest.mark.parametrize("head, config, admitted, head_reason", STARVATION)
def test_starving_head_reservation(head, config, admitted, head_reason):
    nodes = rack_fleet(racks=1, nodes=4)
    running = a_gang(2, 8).id(9).running_on("b0r0n0", "b0r0n1")
    small = a_gang(1, 8).id(2).submitted(9_000)
    snap = snapshot(nodes, [queue("q", 32, cohort=None)], admitted=[running], pending=[head.id(1).submitted(1), small],
                    now=10_000.0, config=config)
    result = run_admission_cycle(snap)
    assert admitted_ids(result) == admitted
    assert_reservation(result, head_reason)


def test_a_queue_that_borrows_more_than_its_starving_head_needs_takes_no_reservation():
    # q (nominal 16) runs 40 GPUs, 24 of them borrowed from idle l: draining that for one 16-GPU job
    # would freeze q for long, so its small job still passes and the head waits for the cohort.
    nodes = rack_fleet(racks=1, nodes=6)  # one node left free: the head cannot fit, the small job can
    running = [a_gang(1, 8).id(20 + i).running_on(f"b0r0n{i}") for i in range(5)]
    pending = [a_gang(2, 8).id(1).submitted(1), a_gang(1, 8).id(2).submitted(9_000)]
    lender = queue("l", 48, team="tl")
    snap = snapshot(nodes, [queue("q", 16), lender], admitted=running, pending=pending, now=10_000.0,
                    config=SchedulerConfig(preemption_enabled=False))
    result = run_admission_cycle(snap)
    assert admitted_ids(result) == [2]
    assert reasons(result) == {1: PendingReason.FIT}


def assert_reservation(result, head_reason):
    if head_reason is PendingReason.ORDER:
        assert reasons(result) == {1: PendingReason.QUOTA, 2: PendingReason.ORDER}
        assert "waiting behind job 1" in next(p.message for p in result.pending if p.job_id == 2)
    else:
        assert reasons(result)[1] is head_reason


def test_the_queue_with_the_lowest_share_goes_first():
    nodes = rack_fleet(racks=1, nodes=3)
    borrower_running = a_gang(2, 8).in_queue("a").running_on("b0r0n0", "b0r0n1")
    a_next = a_gang(1, 8).id(10).in_queue("a").submitted(1)
    b_next = a_gang(1, 8).id(11).in_queue("b").submitted(2)
    result = run_admission_cycle(
        snapshot(nodes, [queue("a", 8), queue("b", 16)], admitted=[borrower_running], pending=[a_next, b_next],
                 config=SchedulerConfig())  # the default value rule: preempting a's 2.8 h uncheckpointed run does not pay
    )
    assert admitted_ids(result) == [11]


def test_at_equal_share_the_team_with_less_recent_usage_goes_first():
    nodes = rack_fleet(racks=1, nodes=1)
    a_job = a_gang(1, 8).id(1).in_queue("a").submitted(1)
    b_job = a_gang(1, 8).id(2).in_queue("b").submitted(2)
    queues = [queue("a", 8), queue("b", 8)]
    history = {"a": 1_000_000.0, "b": 10.0}
    result = run_admission_cycle(snapshot(nodes, queues, pending=[a_job, b_job], historical_usage=history))
    assert admitted_ids(result) == [2]
    result = run_admission_cycle(snapshot(nodes, queues, pending=[a_job, b_job]))
    assert admitted_ids(result) == [1]


@pytest.mark.parametrize(
    "big_usage_gpu_h, small_usage_gpu_h, first",
    [
        pytest.param(64, 16, "small", id="the same share of their quotas: the small queue submitted first goes first"),
        pytest.param(64, 24, "big", id="a small queue that used more of its quota waits though it used fewer GPU-hours"),
        pytest.param(200, 16, "small", id="a big queue that used more of its quota waits"),
    ],
)
def test_usage_history_is_measured_against_each_queues_entitlement(big_usage_gpu_h, small_usage_gpu_h, first):
    nodes = rack_fleet(racks=1, nodes=1)
    small_job = a_gang(1, 8).id(1).in_queue("small").submitted(1)
    big_job = a_gang(1, 8).id(2).in_queue("big").submitted(2)
    queues = [queue("small", 8), queue("big", 32)]
    history = {"big": big_usage_gpu_h * 3600.0, "small": small_usage_gpu_h * 3600.0}
    result = run_admission_cycle(snapshot(nodes, queues, pending=[small_job, big_job], historical_usage=history))
    assert admitted_ids(result) == [1 if first == "small" else 2]


def test_decayed_usage_halves_every_half_life():
    assert decay_usage(100.0, 0, 7 * 86400, 7 * 86400) == pytest.approx(50.0)
    one_step = decay_usage(0.0, 8, 7200, 3600)
    two_steps = decay_usage(decay_usage(0.0, 8, 3600, 3600), 8, 3600, 3600)
    assert one_step == pytest.approx(two_steps)


def test_a_queue_never_exceeds_nominal_plus_what_the_cohort_lends():
    nodes = rack_fleet(racks=2, nodes=4)
    jobs = [a_gang(1, 8).id(i).in_queue("a").submitted(i) for i in range(1, 9)]
    result = run_admission_cycle(
        snapshot(nodes, [queue("a", 16, borrowing_limit=16), queue("b", 48)], pending=jobs)
    )
    assert len(result.admissions) == 4
    assert sum(a.is_borrowing for a in result.admissions) == 2


def test_a_job_that_may_not_borrow_does_not_hold_back_one_of_its_size_that_may():
    """Only a preemptible job may borrow: one refused quota for not being preemptible says nothing of the next."""
    queues = (queue("a", 8), queue("b", 16))
    pending = (a_gang(1, 8).in_queue("a").build(), a_gang(2, 8).in_queue("a").not_preemptible().id(1).build(),
               a_gang(2, 8).in_queue("a").id(2).build())
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=4), queues, pending=pending))
    assert 2 in {a.job_id for a in result.admissions}
    assert result.pending.by_job()[1][0] is PendingReason.QUOTA


def test_a_gang_not_ready_in_time_is_evicted_with_backoff():
    config = SchedulerConfig(pods_ready_timeout_s=600)
    stuck = a_gang(1, 8).id(1).running_on("b0r0n0", since=1000, ready=False)
    waiting = a_gang(1, 8).id(2).submitted(5)
    result = run_admission_cycle(
        snapshot(rack_fleet(racks=1, nodes=1), [queue("q", 8)], admitted=[stuck], pending=[waiting], now=1600, config=config)
    )
    assert [e.job_id for e in result.evictions] == [1]
    assert result.evictions[0].backoff_until == 1600 + 60
    assert admitted_ids(result) == [2], "the evicted gang's GPUs are free in the same cycle"


def test_a_ready_gang_or_one_within_the_timeout_is_kept():
    config = SchedulerConfig(pods_ready_timeout_s=600)
    young = a_gang(1, 8).id(1).running_on("b0r0n0", since=1100, ready=False)
    ready = a_gang(1, 8).id(2).running_on("b0r0n1", since=0, ready=True)
    result = run_admission_cycle(
        snapshot(rack_fleet(racks=1, nodes=2), [queue("q", 16)], admitted=[young, ready], now=1600, config=config)
    )
    assert result.evictions == ()


@pytest.mark.parametrize(
    "evictions, expected_s",
    [(1, 60), (2, 120), (3, 240), (7, 3600), (20, 3600)],
    ids=lambda v: str(v),
)
def test_backoff_doubles_from_a_minute_and_caps_at_an_hour(evictions, expected_s):
    assert backoff_s(evictions, SchedulerConfig()) == expected_s


def test_a_job_in_backoff_is_not_admitted():
    job = a_gang(1, 8).id(1)._with(backoff_until=20_000.0)
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=1), [queue("q", 8)], pending=[job]))
    assert reasons(result) == {1: PendingReason.BACKOFF}


def test_the_fit_reason_names_fragmentation_with_numbers():
    nodes = rack_fleet(racks=1, nodes=4)
    half_used = [a_gang(1, 4).id(100 + i).running_on(n.name) for i, n in enumerate(nodes)]
    result = run_admission_cycle(
        snapshot(nodes, [queue("q", 64)], admitted=half_used, pending=[a_gang(2, 8).id(1)], config=SchedulerConfig(preemption_enabled=False))
    )
    (pending,) = result.pending
    assert pending.reason is PendingReason.FIT
    assert pending.message == ("needs 16 H100 GPUs in 2 whole nodes; 16 free on 4 usable nodes, 0 whole nodes free"
                               " — fragmentation: 16 GPUs scattered over 4 partly used nodes")


def test_an_unknown_queue_is_reported_not_crashed():
    result = run_admission_cycle(snapshot(rack_fleet(), [queue("q", 8)], pending=[a_gang(1, 8).id(1).in_queue("ghost")]))
    assert reasons(result) == {1: PendingReason.QUOTA}


def test_the_same_snapshot_gives_the_same_decisions():
    nodes = rack_fleet(blocks=2, racks=2, nodes=3)
    jobs = [a_gang(1 + i % 3, (8, 4, 2)[i % 3]).id(i).in_queue("ab"[i % 2]).submitted(i % 5) for i in range(30)]
    snap = snapshot(nodes, [queue("a", 40), queue("b", 56)], pending=jobs)
    assert run_admission_cycle(snap) == run_admission_cycle(snap)
