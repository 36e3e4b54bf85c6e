"""The cycle moves small checkpointing jobs for a gang its own quota holds, when only fragmentation keeps it out and the
moves pay (SchedulerConfig.defragment_for_owed_gangs, core.defragmentation)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.defragmentation import jobs_on_nodes, moves_pay, natural_drain_s, nodes_emptied
from scheduling.core.model import PendingReason, SchedulerConfig
from scheduling.core.placement import FleetState
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 100_000.0
DEFRAGMENTING = SchedulerConfig(defragment_for_owed_gangs=True)
NO_APPROVALS = replace(DEFRAGMENTING, cross_team_needs_approval=False)


def a_fragmented_rack(*, checkpoint_s=1800, ran_s=10 * 3600 + 600, owner_nominal=16, config=NO_APPROVALS):
    """Four 8-GPU nodes, each half used by a 4-GPU job of team `others` (within its nominal quota): 16 GPUs free, no
    whole node. Team `owner`'s fresh 2 × 8-GPU gang is within its nominal quota when `owner_nominal` ≥ 16."""
    nodes = rack_fleet(racks=1, nodes=4)
    running = [a_gang(1, 4).id(10 + i).in_queue("others").checkpointing(checkpoint_s)
               .running_on(f"b0r0n{i}", since=NOW - ran_s) for i in range(4)]
    gang = a_gang(2, 8).id(1).in_queue("owner").submitted(NOW - 60)
    queues = [queue("owner", owner_nominal), queue("others", 32 - owner_nominal)]
    return snapshot(nodes, queues, admitted=running, pending=[gang], now=NOW, config=config)


def verdict_of(result, job_id):
    return next((p.reason, p.message) for p in result.pending if p.job_id == job_id)


def moved_by(result, job_id):
    return next((a.preempted for a in result.admissions if a.job_id == job_id), None)


@pytest.mark.parametrize(
    "scenario, moved",
    [
        pytest.param({}, 2,
                     id="an owed gang kept out only by fragmentation moves the jobs off two nodes and starts"),
        pytest.param({"owner_nominal": 8}, None,
                     id="a gang that would borrow gets no moves: the free GPUs are other teams' to use"),
        pytest.param({"checkpoint_s": None}, None,
                     id="jobs without checkpoints are never moved: each would lose its whole run"),
        pytest.param({"ran_s": 1200}, None,
                     id="no moves when the nodes would drain soon on their own: the moves would not pay"),
        pytest.param({"config": SchedulerConfig(cross_team_needs_approval=False)},
                     None, id="by default the rule is off and the gang waits for the nodes to drain"),
    ],
)
def test_defragmentation_for_owed_gangs(scenario, moved):
    result = run_admission_cycle(a_fragmented_rack(**scenario))
    preempted = moved_by(result, 1)
    assert (len(preempted) if preempted is not None else None) == moved
    if moved is None:
        assert verdict_of(result, 1)[0] is PendingReason.FIT


def test_the_moves_leave_room_for_the_moved_jobs_and_take_the_cheapest_nodes():
    snap = a_fragmented_rack()
    cheap = {11, 13}  # ran 10 h 1 min: checkpointed a minute ago; the others ten minutes ago
    running = [replace(job, started_at=NOW - 10 * 3600 - 60) if job.id in cheap else job for job in snap.admitted]
    result = run_admission_cycle(snapshot(list(snap.nodes), list(snap.queues.values()), admitted=running,
                                          pending=list(snap.pending), now=NOW, config=NO_APPROVALS))
    assert sorted(moved_by(result, 1)) == [11, 13]


def test_moves_across_teams_await_an_admin_and_say_what_they_move():
    result = run_admission_cycle(a_fragmented_rack(config=DEFRAGMENTING))
    reason, message = verdict_of(result, 1)
    assert reason is PendingReason.AWAITING_APPROVAL
    assert "moving 2 checkpointing job(s) off partly used nodes costing" in message
    assert [p.plan.reason for p in result.preemptions] == [PendingReason.FIT]
    assert result.preemptions[0].needs_approval


@pytest.mark.parametrize(
    "runs_s, nodes, expected",
    [
        pytest.param([[300, 7200], [600]], 1, 600, id="a node empties when its longest run ends"),
        pytest.param([[300, 7200], [600]], 2, 7200, id="two nodes: the second to empty"),
        pytest.param([[300, 7200], [600]], 3, math.inf, id="more nodes than are partly used never empty"),
        pytest.param([[300]], 0, 0.0, id="a gang that needs no node waits for none"),
    ],
)
def test_natural_drain(runs_s, nodes, expected):
    fleet_nodes = rack_fleet(racks=1, nodes=len(runs_s))
    holders, next_id = [], 10
    for i, runs in enumerate(runs_s):
        for ran in runs:
            holders.append(a_gang(1, 1).id(next_id).running_on(f"b0r0n{i}", since=NOW - ran).build())
            next_id += 1
    fleet = FleetState(fleet_nodes, ("block", "rack"))
    for job in holders:
        fleet.allocate_placement(job.placement, job)
    by_node = jobs_on_nodes(holders, fleet)
    classes = fleet.tolerated_classes(holders[0])
    assert natural_drain_s(fleet, by_node, classes, nodes, NOW) == expected


@settings(max_examples=200, deadline=None)
@given(
    jobs=st.lists(st.tuples(st.integers(1, 6), st.floats(0, 40 * 3600), st.sampled_from([None, 600, 1800])),
                  min_size=4, max_size=8),
    margin=st.sampled_from([1.0, 3.0]),
)
def test_moves_are_only_made_when_the_gang_gains_more_than_they_cost(jobs, margin):
    """Whatever the small jobs on the rack, every defragmentation the cycle plans moves checkpointing jobs only and costs
    less than the drain it spares."""
    nodes = rack_fleet(racks=1, nodes=4)
    running = [a_gang(1, gpus).id(10 + k).in_queue("others").checkpointing(checkpoint_s)
               .running_on(f"b0r0n{k % 4}", since=NOW - ran_s).build()
               for k, (gpus, ran_s, checkpoint_s) in enumerate(jobs)]
    fleet = FleetState(nodes, ("block", "rack"))
    kept = []
    for job in running:  # as many as the nodes hold
        if all(fleet.free[fleet.index_of[p.node]] >= job.gpus for p in job.placement):
            fleet.allocate_placement(job.placement, job)
            kept.append(job)
    gang = a_gang(2, 8).id(1).in_queue("owner").submitted(NOW - 60)
    config = replace(NO_APPROVALS, payoff_margin=margin)
    # The others' quota holds all they run, so they lend nothing: any plan is a defragmentation, none a reclaim.
    result = run_admission_cycle(snapshot(nodes, [queue("owner", 16), queue("others", 48)], admitted=kept,
                                          pending=[gang], now=NOW, config=config))
    by_node, classes = jobs_on_nodes(kept, fleet), fleet.tolerated_classes(gang.build())
    by_id = {job.id: job for job in kept}
    for planned in result.preemptions:
        moved = [by_id[v.job_id] for v in planned.plan.victims]
        assert all(job.checkpoint_interval_s for job in moved)
        drain = natural_drain_s(fleet, by_node, classes, nodes_emptied(moved), NOW)
        assert moves_pay(planned.plan, gang.build(), drain, margin)
