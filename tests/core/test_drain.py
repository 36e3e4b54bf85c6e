"""SchedulerConfig.drain_for_underserved_gangs: jobs that would borrow keep off the nodes an under-served team's gang
needs (core.drain)."""

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.defragmentation import jobs_on_nodes
from scheduling.core.drain import choose_drain, underserved_teams
from scheduling.core.explain.explainer import explain_pending
from scheduling.core.explain.facts import Level
from scheduling.core.model import PendingReason, SchedulerConfig
from scheduling.core.placement import fleet_state_for
from scheduling.core.policy import policy_in_force
from scheduling.core.quota import QuotaLedger
from tests.core.builders import a_gang, node, queue, rack_fleet, snapshot

DRAINS = SchedulerConfig(drain_for_underserved_gangs=True)
NODES = tuple(node(name) for name in ("a", "b", "c", "d"))
QUEUES = (queue("lender", 24), queue("borrower", 16))
"""The cohort's quota (40 GPUs) exceeds the fleet's 32, so the lender's quota holds its gang although the borrower
runs 18 GPUs: only placement keeps the gang out."""
SHARE_USED = {"lender": 1_000.0, "borrower": 1_000_000.0}
"""The lender has used a thousandth of what the borrower has: under-served."""


def borrowers_pods(free_by_node: dict[str, int], since_by_node: dict[str, float] | None = None):
    """The borrower's one-GPU jobs filling each node but `free_by_node[node]` GPUs (18 in all: 2 borrowed), started at
    `since_by_node[node]` (default 0: 10,000 s before the pass)."""
    since_by_node = since_by_node or {}
    jobs = []
    for name, free in free_by_node.items():
        since = since_by_node.get(name, 0.0)
        jobs += [a_gang(1, 1).in_queue("borrower").running_on(name, since=since).build() for _ in range(8 - free)]
    return jobs


RUNNING = borrowers_pods({"a": 1, "b": 2, "c": 6, "d": 5})
LENDERS_GANG = a_gang(2, 8).in_queue("lender").id(100).submitted(500.0)


def one_pass(*pending, usage=SHARE_USED, config=DRAINS, running=RUNNING):
    state = snapshot(NODES, QUEUES, admitted=running, pending=(LENDERS_GANG, *pending), config=config,
                     historical_usage=usage)
    return state, run_admission_cycle(state)


def drain_for(state, by_queue, usage=SHARE_USED):
    """The drain a pass over `state` chooses, with the names of its nodes."""
    fleet = fleet_state_for(state)
    for job in state.admitted:
        fleet.allocate_placement(job.placement, job)
    drain = choose_drain(by_queue, state.queues, usage, QuotaLedger(state.queues, state.admitted), fleet,
                         jobs_on_nodes(state.admitted, fleet), state.now)
    return drain, (sorted(fleet.nodes[i].name for i in drain.nodes) if drain else [])


def outcome(result, job_id):
    """Where the job went ("a", …), or its pending reason."""
    for admission in result.admissions:
        if admission.job_id == job_id:
            return ",".join(sorted({p.node for p in admission.placement}))
    return result.pending.by_job()[job_id][0]


@pytest.mark.parametrize(
    "job, usage, expected",
    [
        pytest.param(a_gang(1, 4).in_queue("borrower").id(7), SHARE_USED, PendingReason.ORDER,
                     id="a job that would borrow keeps off the nodes draining for an under-served team's gang"),
        pytest.param(a_gang(1, 2).in_queue("borrower").id(7), SHARE_USED, "b",
                     id="a job that would borrow still takes the nodes the drain does not hold"),
        pytest.param(a_gang(1, 4).in_queue("lender").id(7), SHARE_USED, "d",
                     id="a job its own quota holds goes anywhere"),
        pytest.param(a_gang(1, 4).in_queue("borrower").id(7), {"lender": 900_000.0, "borrower": 1_000_000.0}, "d",
                     id="a team that has used about its share gets no drain"),
        pytest.param(a_gang(1, 4).in_queue("borrower").id(7), {}, "d",
                     id="with no usage history nobody is under-served"),
    ],
)
def test_who_keeps_off_a_drain(job, usage, expected):
    _, result = one_pass(job, usage=usage)
    assert outcome(result, 7) == expected
    assert outcome(result, 100) == PendingReason.FIT, "the gang itself waits for its nodes"


NOW = 10_000.0


@pytest.mark.parametrize(
    "since_by_node, expected",
    [
        pytest.param({}, ["c", "d"], id="of nodes as soon empty the drain holds those with the most free gpus"),
        pytest.param({"a": NOW - 600, "b": NOW - 900, "c": 0.0, "d": NOW - 3_600}, ["a", "b"],
                     id="the drain holds the nodes whose longest run is shortest, before those with the most free gpus"),
        pytest.param({"a": NOW - 600, "b": NOW - 7 * 3600, "c": NOW - 7 * 3600, "d": NOW - 7 * 3600}, [],
                     id="no drain when the gang's nodes should take longer than six hours to empty"),
    ],
)
def test_which_nodes_the_drain_holds(since_by_node, expected):
    running = borrowers_pods({"a": 1, "b": 2, "c": 6, "d": 5}, since_by_node)
    state = snapshot(NODES, QUEUES, admitted=running, pending=(LENDERS_GANG,), historical_usage=SHARE_USED, now=NOW)
    drain, nodes = drain_for(state, {"lender": [LENDERS_GANG.build()]})
    assert nodes == expected
    assert drain is None or drain.job.id == 100


def test_a_job_that_would_borrow_takes_any_node_when_no_drain_would_empty_soon():
    old_runs = borrowers_pods({"a": 1, "b": 2, "c": 6, "d": 5}, dict.fromkeys("abcd", NOW - 7 * 3600))
    _, result = one_pass(a_gang(1, 4).in_queue("borrower").id(7), running=old_runs)
    assert outcome(result, 7) == "d"


def test_a_job_kept_off_a_drain_is_told_which_gang_it_waits_for():
    state, result = one_pass(a_gang(1, 4).in_queue("borrower").id(7))
    reason, message = result.pending.by_job()[7]
    assert reason is PendingReason.ORDER
    assert "would borrow" in message and "(c, d)" in message and "gang 100 of team lender" in message
    explanation = explain_pending(state, result).by_job[7]
    assert explanation.blocking is Level.ORDER and "draining for gang 100" in explanation.summary


def test_the_option_is_off_by_default():
    _, result = one_pass(a_gang(1, 4).in_queue("borrower").id(7), config=SchedulerConfig())
    assert outcome(result, 7) == "d"


@pytest.mark.parametrize(
    "gang, drains",
    [
        pytest.param(a_gang(2, 8), True, id="a gang of several pods is drained for"),
        pytest.param(a_gang(1, 8), True, id="one pod as wide as a node is drained for"),
        pytest.param(a_gang(1, 7), False, id="a single pod narrower than a node is not"),
        pytest.param(a_gang(4, 8), False, id="a gang that would borrow is not"),
    ],
)
def test_which_gangs_are_drained_for(gang, drains):
    busy = borrowers_pods({"a": 0, "b": 0, "c": 6, "d": 5})  # nothing fits a whole node or 7 GPUs
    job = gang.in_queue("lender").id(100).build()
    state = snapshot(NODES, QUEUES, admitted=busy, pending=(job,), historical_usage=SHARE_USED)
    drain, _ = drain_for(state, {"lender": [job]})
    assert (drain is not None) is drains


def test_only_the_longest_waiting_gang_of_the_under_served_teams_drains():
    queues = (*QUEUES, queue("other", 16))
    usage = {**SHARE_USED, "other": 0.0}
    older = a_gang(1, 8).in_queue("other").id(200).submitted(100.0).build()
    younger = LENDERS_GANG.build()
    state = snapshot(NODES, queues, admitted=RUNNING, pending=(younger, older), historical_usage=usage)
    drain, nodes = drain_for(state, {"lender": [younger], "other": [older]}, usage)
    assert drain.job.id == 200 and len(nodes) == 1


def test_a_gang_that_requires_a_rack_drains_nodes_of_one_rack():
    nodes = rack_fleet(racks=2, nodes=2)  # b0r0n0, b0r0n1 | b0r1n0, b0r1n1
    free = {"b0r0n0": 6, "b0r0n1": 1, "b0r1n0": 4, "b0r1n1": 4}
    busy = []
    for name, left in free.items():
        busy += [a_gang(1, 1).in_queue("borrower").running_on(name).build() for _ in range(8 - left)]
    job = a_gang(2, 8).in_queue("lender").requires("rack").id(100).build()
    state = snapshot(nodes, QUEUES, admitted=busy, pending=(job,), historical_usage=SHARE_USED)
    _, nodes = drain_for(state, {"lender": [job]})
    assert nodes == ["b0r1n0", "b0r1n1"]


@pytest.mark.parametrize("config, expected", [
    pytest.param(SchedulerConfig(), "off", id="by default the admin reads that nothing drains"),
    pytest.param(DRAINS, "used less than half the average share", id="with the option on the admin reads the rule"),
])
def test_the_admin_sees_whether_nodes_drain(config, expected):
    assert expected in policy_in_force(config)["drains"]


def test_underserved_means_below_half_the_average_use_per_nominal_gpu():
    queues = {q.name: q for q in (queue("x", 16), queue("y", 16), queue("z", 32))}
    # average per nominal GPU: (10 + 100 + 190) / 64 = 4.7; x: 0.6 (under), y: 6.3, z: 5.9
    assert underserved_teams(queues, {"x": 10.0, "y": 100.0, "z": 190.0}) == {"x"}
    assert underserved_teams(queues, {}) == set()
