"""Fragmentation: metrics, and small jobs placed so that whole nodes stay whole."""

import random

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fragmentation import measure
from scheduling.core.model import FLEET, PendingReason, SchedulerConfig
from scheduling.core.placement import FleetState
from tests.core.builders import FLAVOR, a_gang, queue, rack_fleet, snapshot


def test_metrics_count_whole_nodes_scattered_gpus_and_largest_gangs():
    fleet = FleetState(rack_fleet(racks=2, nodes=2), ("block", "rack"))
    fleet.allocate(fleet.index_of["b0r0n0"], 6)
    fleet.allocate(fleet.index_of["b0r1n0"], 8)
    report = measure(fleet, FLAVOR)
    assert (report.free_gpus, report.whole_free_nodes, report.scattered_gpus, report.partly_used_nodes) == (18, 2, 2, 1)
    assert report.largest_gang_pods(8) == 2
    assert report.largest_gang_pods(8, level="rack") == 1
    assert report.largest_gang_pods(2, level="rack") == 5


def test_scattered_free_gpus_do_not_admit_a_whole_node_gang():
    nodes = rack_fleet(racks=2, nodes=4)
    half_used = [a_gang(1, 4).id(100 + i).running_on(n.name) for i, n in enumerate(nodes)]
    gang = a_gang(2, 8).id(1)
    result = run_admission_cycle(
        snapshot(nodes, [queue("q", 64)], admitted=half_used, pending=[gang], config=SchedulerConfig(preemption_enabled=False))
    )
    assert result.admissions == ()
    assert result.pending[0].reason is PendingReason.FIT


def _place_stream(nodes, busy, stream, topology_aware):
    fleet = FleetState(nodes, ("block", "rack"), topology_aware=topology_aware)
    for name, gpus in busy:
        fleet.allocate(fleet.index_of[name], gpus)
    for job in stream:
        placement = fleet.place(job)
        assert placement is not None
        fleet.commit(placement)
    return measure(fleet, FLAVOR)


def test_small_jobs_fill_half_used_nodes_and_keep_more_whole_nodes_than_first_fit():
    # Every other node is half used; whole free nodes come first by name, as they often do.
    nodes = rack_fleet(racks=2, nodes=8)
    busy = [(n.name, 4) for n in nodes[1::2]]
    rng = random.Random(3)
    stream = [a_gang(1, rng.choice([1, 2, 4])).id(i).build() for i in range(12)]
    ours = _place_stream(nodes, busy, stream, topology_aware=True)
    first_fit = _place_stream(nodes, busy, stream, topology_aware=False)
    assert ours.free_gpus == first_fit.free_gpus
    assert ours.whole_free_nodes == 8, "no whole node was broken"
    assert first_fit.whole_free_nodes < ours.whole_free_nodes
    assert ours.largest_gang_pods(8, level=FLEET) > first_fit.largest_gang_pods(8, level=FLEET)
