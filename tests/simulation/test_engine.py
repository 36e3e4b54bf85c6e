"""The engine, event by event on small golden traces, and its invariants on random ones."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.simulation.engine import simulate
from scheduling.simulation.policies import POLICIES, get_policy
from tests.simulation.helpers import scenario, trace

EVERY_PLAN_RUNS = replace(
    get_policy("gangway"), config=replace(get_policy("gangway").config, preempt_only_when_it_pays=False)
)
"""For the engine's preemption mechanics: these victims ran minutes without checkpoints, a loss the
default value rule (core.payoff) rightly refuses for a gang half their size."""


def events(result, *, with_nodes: bool = False):
    return [(t, what, job, detail) if with_nodes else (t, what, job) for t, what, job, detail in result.log]


def test_golden_trace_arrivals_admissions_and_ends_event_by_event():
    jobs = trace(
        (0, "a", 8, 100),  # 1: fills node 1
        (10, "b", 8, 50),  # 2: fills node 2
        (20, "a", 4, 30),  # 3: waits for node 2 (ends 60)
        (20, "b", 16, 10),  # 4: a two-node gang: waits until both nodes are free (100)
    )
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), get_policy("kueue-like"), log=True)
    assert events(result) == [
        (0.0, "arrive", 1),
        (0.0, "start", 1),
        (10.0, "arrive", 2),
        (10.0, "start", 2),
        (20.0, "arrive", 3),
        (20.0, "arrive", 4),
        (60.0, "end", 2),
        (60.0, "start", 3),
        (90.0, "end", 3),
        (100.0, "end", 1),
        (100.0, "start", 4),
        (110.0, "end", 4),
    ]
    starts = {job: tuple(node for node, _ in pods) for _, what, job, pods in result.log if what == "start"}
    assert starts == {1: ("n1",), 2: ("n2",), 3: ("n2",), 4: ("n1", "n2")}
    waits = {r.id: r.waited_s for r in result.records.values()}
    assert waits == {1: 0.0, 2: 0.0, 3: 40.0, 4: 80.0}


def test_on_a_beat_cycles_run_only_on_its_multiples_and_serve_what_came_in_between_together():
    jobs = trace(
        (0, "a", 8, 100),  # 1: on the beat: starts at once
        (10, "b", 8, 50),  # 2: waits for the beat at 60
        (20, "a", 4, 30),  # 3: no room until job 1 ends at 100; the next beat is 120
    )
    beat = replace(scenario(jobs, {"a": 8, "b": 8}), cycle_interval_s=60.0)
    result = simulate(beat, get_policy("kueue-like"), log=True)
    assert [(t, job) for t, what, job in events(result) if what == "start"] == [(0.0, 1), (60.0, 2), (120.0, 3)]
    assert {r.id: r.waited_s for r in result.records.values()} == {1: 0.0, 2: 50.0, 3: 100.0}


def test_strict_fifo_new_arrival_waits_behind_its_blocked_head():
    jobs = trace(
        (0, "a", 8, 100),  # 1: all of team a's partition
        (5, "a", 8, 10),  # 2: head, blocked until 100
        (6, "a", 1, 10),  # 3: would fit nowhere anyway — a's partition is one node
        (7, "b", 1, 10),  # 4: team b's own node
    )
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), get_policy("fifo-isolated"), log=True)
    starts = {job: t for t, what, job, _ in result.log if what == "start"}
    assert starts == {1: 0.0, 4: 7.0, 2: 100.0, 3: 110.0}


def test_reclaim_preempts_the_borrower_which_restarts_with_overhead_and_loses_its_work():
    jobs = trace(
        (0, "b", 16, 1000),  # 1: borrows team a's 8 GPUs
        (10, "a", 8, 100),  # 2: reclaims them
    )
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), EVERY_PLAN_RUNS, log=True)
    assert events(result) == [
        (0.0, "arrive", 1),
        (0.0, "start", 1),
        (10.0, "arrive", 2),
        (10.0, "preempt", 1),
        (10.0, "start", 2),
        (110.0, "end", 2),
        (110.0, "start", 1),
        (1410.0, "end", 1),  # all 1000 s again (no checkpoints) + 300 s restart overhead
    ]
    victim = result.records[1]
    assert (victim.preemptions, victim.waited_s, victim.lost_gpu_s) == (1, 100.0, 16 * (10.0 + 300.0))
    assert result.preemptions == 1


NEVER_WAITS_FOR_CHECKPOINTS = replace(
    get_policy("gangway"), config=replace(get_policy("gangway").config, preempt_at_checkpoints="never")
)


@pytest.mark.parametrize(
    ("policy", "expected", "lost_gpu_s"),
    [
        pytest.param(get_policy("gangway"), [(12_600.0, "preempt", 1), (12_600.0, "start", 2), (13_200.0, "start", 1)],
                     8 * 300.0, id="put off until the victim's checkpoint, it runs then: the victim loses only the restart"),
        pytest.param(NEVER_WAITS_FOR_CHECKPOINTS, [(12_000.0, "preempt", 1), (12_000.0, "start", 2), (12_600.0, "start", 1)],
                     8 * (1200.0 + 300.0), id="with the rule off it preempts at once: the victim redoes its 20 minutes"),
    ],
)
def test_a_plan_put_off_until_its_victims_checkpoint_runs_at_that_checkpoint(policy, expected, lost_gpu_s):
    """Nothing else happens at 12,600 s: the cycle there is the one the deferred plan asked for."""
    jobs = trace(
        (0, "a", 8, 100 * 3600),  # 1: checkpoints every 30 min; past 2 GPU-hours it is a victim of fresh jobs
        (3 * 3600 + 20 * 60, "a", 8, 600),  # 2: 20 min after job 1's last checkpoint
    )
    result = simulate(scenario(jobs, {"a": 8}, nodes=1, rack_size=1, checkpoint=1800), policy, log=True)
    starts = [(t, what, job) for t, what, job in events(result) if what in ("preempt", "start")]
    assert starts == [(0.0, "start", 1), *expected]
    assert result.records[1].lost_gpu_s == lost_gpu_s


def test_checkpoints_keep_the_work_up_to_the_last_one():
    jobs = trace((0, "b", 16, 1000), (250, "a", 8, 100))
    result = simulate(scenario(jobs, {"a": 8, "b": 8}, checkpoint=100), EVERY_PLAN_RUNS, log=True)
    ends = {job: t for t, what, job, _ in result.log if what == "end"}
    # preempted at 250 with 200 s checkpointed: 800 s left + 300 s overhead, restarted at 350
    assert ends == {2: 350.0, 1: 1450.0}
    assert result.records[1].lost_gpu_s == 16 * (50.0 + 300.0)  # 50 s since the checkpoint + the restart overhead


@pytest.mark.parametrize(
    ("jobs", "checkpoint", "expected"),
    [
        pytest.param(trace((0, "a", 8, 100), (50, "b", 8, 10)), None, {1: 8 * 50.0, 2: 0.0},
                     id="a run across the last submission counts its part before it"),
        pytest.param(trace((0, "b", 16, 1000), (250, "a", 8, 100)), 100, {1: 16 * 200.0, 2: 0.0},
                     id="a preempted run counts the work its checkpoints kept"),
        pytest.param(trace((0, "b", 16, 1000), (250, "a", 8, 100)), None, {1: 0.0, 2: 0.0},
                     id="a preempted run without checkpoints counts nothing"),
    ],
)
def test_the_work_in_the_span_is_the_kept_work_before_the_last_submission(jobs, checkpoint, expected):
    result = simulate(scenario(jobs, {"a": 8, "b": 8}, checkpoint=checkpoint), EVERY_PLAN_RUNS)
    assert {r.id: r.work_gpu_s_in_span for r in result.records.values()} == expected


def test_without_approval_a_cross_team_reclaim_waits():
    jobs = trace((0, "b", 16, 1000), (10, "a", 8, 100))
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), replace(get_policy("gangway"), approve="none"), log=True)
    starts = {job: t for t, what, job, _ in result.log if what == "start"}
    assert starts == {1: 0.0, 2: 1000.0}
    assert result.preemptions == 0


def test_sjf_oracle_runs_the_shortest_waiting_job_first():
    jobs = trace((0, "a", 16, 100), (1, "a", 16, 50), (2, "b", 16, 10))
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), get_policy("sjf-oracle"), log=True)
    starts = [job for _, what, job, _ in result.log if what == "start"]
    assert starts == [1, 3, 2]


# --- invariants on random traces --------------------------------------------------------------

job_tuples = st.tuples(
    st.integers(0, 400).map(float),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1, 1, 2, 4, 8, 12, 16]),
    st.integers(1, 600).map(float),
    st.integers(0, 2),
)


@st.composite
def scenarios(draw):
    jobs = trace(*draw(st.lists(job_tuples, min_size=1, max_size=25)))
    quotas = {"a": 16, "b": 8, "c": 8}
    return scenario(jobs, quotas, nodes=4, rack_size=2, checkpoint=draw(st.sampled_from([None, 60]))), draw(
        st.sampled_from(sorted(POLICIES))
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_job_starts_once_per_admission_ends_and_no_node_is_over_committed(case):
    scen, name = case
    result = simulate(scen, get_policy(name), log=True)
    capacity = {node.name: node.allocatable_gpus for node in scen.fleet.nodes}
    used = dict.fromkeys(capacity, 0)
    holding: dict[int, tuple] = {}
    gpus = {job.id: job.gpus for job in scen.trace.jobs}
    starts = dict.fromkeys(gpus, 0)
    for _, what, job, detail in result.log:
        if what == "start":
            assert job not in holding, f"job {job} started twice without stopping"
            assert sum(g for _, g in detail) == gpus[job], "the whole gang is placed"
            starts[job] += 1
            holding[job] = detail
            for node, g in detail:
                used[node] += g
                assert used[node] <= capacity[node], f"node {node} over-committed"
        elif what in ("end", "preempt", "evict"):
            for node, g in holding.pop(job):
                used[node] -= g
    assert not holding
    for record in result.records.values():
        if record.rejected:
            assert starts[record.id] == 0
            continue
        assert record.end_s is not None, f"job {record.id} never ended"
        assert starts[record.id] == record.runs == 1 + record.preemptions
    served = sum(r.served_gpu_s - r.lost_gpu_s for r in result.records.values())
    expected = sum(j.gpus * j.duration_s for j in scen.trace.jobs if not result.records[j.id].rejected)
    assert math.isclose(served, expected, rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_skipping_cycles_changes_nothing(case):
    """The skipping rules (docs in engine.py) give the same starts as a full cycle at every event."""
    scen, name = case
    fast = simulate(scen, get_policy(name), log=True)
    full = simulate(scen, get_policy(name), log=True, always_full=True)
    assert fast.log == full.log
    assert fast.cycles <= full.cycles


def test_a_gang_larger_than_its_reach_is_rejected_not_left_blocking():
    jobs = trace((0, "a", 16, 10), (1, "a", 8, 10))
    result = simulate(scenario(jobs, {"a": 8, "b": 8}), get_policy("fifo-isolated"), log=True)
    assert result.records[1].rejected
    assert [e[1:] for e in events(result)] == [("reject", 1), ("arrive", 2), ("start", 2), ("end", 2)]


@pytest.mark.parametrize("name", ["fifo-isolated", "kueue-like", "sjf-oracle", "gangway"])
def test_long_queues_on_a_small_fleet_give_the_same_starts_with_and_without_skipping(name):
    """Hundreds of pending jobs, so the strict-FIFO prefix (rule 4) and restricted cycles really apply."""
    jobs = trace(*[(t // 3, "abc"[t % 3], [1, 2, 4, 8, 1, 12][t % 6], 30 + (t * 37) % 200, t % 2) for t in range(300)])
    scen = scenario(jobs, {"a": 16, "b": 8, "c": 8}, nodes=4, rack_size=2)
    fast = simulate(scen, get_policy(name), log=True)
    full = simulate(scen, get_policy(name), log=True, always_full=True)
    assert fast.log == full.log
    assert all(r.end_s is not None or r.rejected for r in fast.records.values())
