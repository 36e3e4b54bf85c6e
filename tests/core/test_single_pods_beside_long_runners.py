"""SchedulerConfig.single_pods_beside_long_runners: a one-pod job joins the node whose oldest job has run longest."""

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import JobState, SchedulerConfig
from scheduling.core.placement import FleetState
from scheduling.core.policy import policy_in_force
from tests.core.builders import a_gang, node, queue, snapshot

TOPOLOGY = ("block", "rack")


def placed_on(running, job, *, nodes=("a", "b", "c"), beside_long_runners=True):
    """The node `job` goes to, with `running` = [(node, GPUs, started at or None), …] already there."""
    fleet = FleetState([node(name) for name in nodes], TOPOLOGY, single_pods_beside_long_runners=beside_long_runners)
    for name, gpus, started_at in running:
        holder = replace(a_gang(1, gpus).running_on(name).build(), started_at=started_at)
        fleet.allocate_placement(holder.placement, holder)
    placement = fleet.place(job.build())
    return fleet.nodes[placement.pods[0].node_index].name


@pytest.mark.parametrize(
    "running, job, expected",
    [
        pytest.param([("a", 6, 5_000.0), ("b", 2, 100.0)], a_gang(1, 1), "b",
                     id="a single pod joins the node whose job has run longest, not the tightest"),
        pytest.param([("a", 1, 100.0), ("a", 1, 9_000.0), ("b", 1, 5_000.0)], a_gang(1, 1), "a",
                     id="a node counts by its longest-running job"),
        pytest.param([("a", 7, 5_000.0), ("b", 2, 5_000.0)], a_gang(1, 1), "a",
                     id="between nodes whose oldest jobs started together the tightest wins"),
        pytest.param([("a", 2, 100.0), ("b", 6, None)], a_gang(1, 1), "a",
                     id="a job that has not started yet is the youngest"),
        pytest.param([("a", 7, 100.0), ("b", 2, 5_000.0)], a_gang(1, 2), "b",
                     id="only a node with room counts"),
        pytest.param([("a", 2, 9_000.0)], a_gang(1, 1), "a",
                     id="a partly used node, however young, comes before a whole free one"),
        pytest.param([("a", 2, 9_000.0)], a_gang(1, 8), "b",
                     id="a pod that needs a whole node takes the first whole free one"),
    ],
)
def test_where_a_single_pod_goes(running, job, expected):
    assert placed_on(running, job) == expected


def test_the_rule_is_an_admins_option_off_by_default():
    assert SchedulerConfig().single_pods_beside_long_runners is False
    assert FleetState([node("a")], TOPOLOGY).single_pods_beside_long_runners is False


def test_with_the_rule_off_a_single_pod_takes_the_tightest_node():
    assert placed_on([("a", 6, 5_000.0), ("b", 2, 100.0)], a_gang(1, 1), beside_long_runners=False) == "a"


def test_a_node_whose_long_runner_ended_is_young_again():
    fleet = FleetState([node("a"), node("b")], TOPOLOGY, single_pods_beside_long_runners=True)
    old = a_gang(1, 1).running_on("a", since=100.0).build()
    young = a_gang(1, 1).running_on("a", since=9_000.0).build()
    middle = a_gang(1, 1).running_on("b", since=5_000.0).build()
    for job in (old, young, middle):
        fleet.allocate_placement(job.placement, job)
    assert fleet.oldest_start(fleet.index_of["a"]) == 100.0
    fleet.release_placement(old.placement, old)
    assert fleet.oldest_start(fleet.index_of["a"]) == 9_000.0
    placement = fleet.place(a_gang(1, 1).build())
    assert fleet.nodes[placement.pods[0].node_index].name == "b"


def test_a_gang_of_several_pods_keeps_the_tightest_fit():
    fleet = FleetState([node("a"), node("b"), node("c")], TOPOLOGY, single_pods_beside_long_runners=True)
    for name, gpus, since in (("a", 4, 100.0), ("b", 6, 9_000.0)):
        holder = a_gang(1, gpus).running_on(name, since=since).build()
        fleet.allocate_placement(holder.placement, holder)
    placement = fleet.place(a_gang(2, 1).build())
    assert sorted(fleet.nodes[p.node_index].name for p in placement.pods) == ["b", "b"]


def test_the_cycle_sees_a_job_start_between_passes():
    """An admitted job's start (None, then a time) reaches the state the next pass places by."""
    nodes = (node("a"), node("b"))
    queues = (queue("q", 16),)
    admitted = replace(a_gang(1, 1).running_on("a").build(), state=JobState.ADMITTED, started_at=None)
    other = a_gang(1, 1).running_on("b", since=5_000.0).build()
    first = snapshot(nodes, queues, admitted=(admitted, other), pending=(a_gang(1, 1).id(901),), now=6_000.0,
                     config=SchedulerConfig(single_pods_beside_long_runners=True))
    first_pass = run_admission_cycle(first)
    assert [a.placement[0].node for a in first_pass.admissions] == ["b"]
    started = replace(admitted, state=JobState.RUNNING, started_at=1_000.0)
    second = replace(first, admitted=(started, other), pending=(a_gang(1, 1).id(902).build(),), now=7_000.0)
    second_pass = run_admission_cycle(second)
    assert [a.placement[0].node for a in second_pass.admissions] == ["a"]


@pytest.mark.parametrize(
    "config, expected",
    [
        pytest.param(SchedulerConfig(), "a single pod on the best-fitting node of the whole fleet",
                     id="by default the policy says best fit"),
        pytest.param(SchedulerConfig(single_pods_beside_long_runners=True),
                     "a single pod on the partly used node whose longest-running job has run longest, then the "
                     "tightest of the whole fleet", id="with the option on the policy says so"),
        pytest.param(SchedulerConfig(single_pods_fleet_wide=False), "the best-fitting node of the tightest rack or block",
                     id="without fleet-wide single pods the policy names the rack"),
    ],
)
def test_the_admin_sees_where_single_pods_go(config, expected):
    assert expected in policy_in_force(config)["placement"]
