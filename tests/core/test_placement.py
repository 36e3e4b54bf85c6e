"""Gang placement: eligibility, all-or-nothing, topology domains and fragmentation awareness."""

from collections import Counter

import pytest

from scheduling.core.model import Taint, Toleration
from scheduling.core.placement import FleetState
from tests.core.builders import a_gang, node, rack_fleet

TOPOLOGY = ("block", "rack")


def place(nodes, job, *, used=(), topology=TOPOLOGY, topology_aware=True):
    fleet = FleetState(nodes, topology, topology_aware=topology_aware)
    for name, gpus in used:
        fleet.allocate(fleet.index_of[name], gpus)
    placement = fleet.place(job.build())
    if placement is None:
        return None
    return [fleet.nodes[p.node_index].name for p in placement.pods]


ELIGIBILITY = [
    pytest.param(dict(is_ready=False), id="a node that is not ready is not used"),
    pytest.param(dict(is_cordoned=True), id="a cordoned node is not used"),
    pytest.param(dict(flavor="A100"), id="a node of another flavor is not used"),
    pytest.param(dict(taints=(Taint("gpu", "broken"),)), id="a node with an untolerated taint is not used"),
    pytest.param(dict(external_gpus=1), id="GPUs held by unmanaged pods are not free"),
    pytest.param(dict(allocatable_gpus=4), id="unhealthy devices are not free"),
]


@pytest.mark.parametrize("overrides", ELIGIBILITY)
def test_ineligible_nodes_are_skipped(overrides):
    nodes = [node("bad", **overrides), node("good")]
    assert place(nodes, a_gang(1, 8)) == ["good"]
    assert place(nodes, a_gang(2, 8)) is None


def test_a_tolerated_taint_does_not_exclude_the_node():
    nodes = [node("tainted", taints=(Taint("gpu", "reserved"),))]
    gang = a_gang(1, 8).tolerates(Toleration("gpu", "Equal", "reserved"))
    assert place(nodes, gang) == ["tainted"]
    assert place(nodes, a_gang(1, 8).tolerates(Toleration("gpu", "Exists"))) == ["tainted"]


def test_a_gang_is_placed_whole_or_not_at_all():
    nodes = rack_fleet(racks=1, nodes=4)
    assert place(nodes, a_gang(5, 8)) is None
    assert sorted(place(nodes, a_gang(4, 8))) == sorted(n.name for n in nodes)


def test_pods_are_packed_onto_partly_used_nodes_first():
    nodes = [node("whole-a"), node("half"), node("whole-b")]
    assert place(nodes, a_gang(1, 4), used=[("half", 4)]) == ["half"]


def test_a_small_pod_fills_the_tightest_hole_not_a_whole_node():
    nodes = [node("whole"), node("six-used"), node("two-used")]
    assert place(nodes, a_gang(1, 2), used=[("six-used", 6), ("two-used", 2)]) == ["six-used"]


@pytest.mark.parametrize(
    "gang, used, expected",
    [
        pytest.param(a_gang(1, 2), [("b0r0n0", 5), ("b0r0n1", 8), ("b0r0n2", 8), ("b0r0n3", 8), ("b0r1n0", 6)],
                     ["b0r1n0"], id="a single pod takes the exact hole in a roomy rack over a looser one in a full rack"),
        pytest.param(a_gang(1, 2).requires(preferred="rack"), [("b0r0n0", 5), ("b0r0n1", 8), ("b0r0n2", 8),
                     ("b0r0n3", 8), ("b0r1n0", 6)], ["b0r0n0"], id="a pod that asks for a rack keeps the rack rule"),
    ],
)
def test_a_single_pod_goes_to_the_best_fitting_node_of_the_whole_fleet(gang, used, expected):
    assert place(rack_fleet(racks=2, nodes=4), gang, used=used) == expected


def test_whole_node_pods_take_whole_nodes_in_the_tightest_rack():
    nodes = rack_fleet(racks=2, nodes=4)
    # rack 0 has two whole free nodes, rack 1 four: a 2-node gang goes to rack 0.
    used = [("b0r0n0", 8), ("b0r0n1", 8)]
    assert sorted(place(nodes, a_gang(2, 8), used=used)) == ["b0r0n2", "b0r0n3"]


def test_without_a_request_the_smallest_domain_that_holds_the_gang_wins():
    nodes = rack_fleet(blocks=2, racks=2, nodes=2)
    placed = place(nodes, a_gang(2, 8))
    assert len({name[:4] for name in placed}) == 1, placed  # one rack


def test_a_required_block_is_never_straddled():
    nodes = rack_fleet(blocks=2, racks=1, nodes=2)
    used = [("b0r0n0", 8), ("b1r0n0", 8)]
    assert place(nodes, a_gang(2, 8).requires("block"), used=used) is None
    assert place(nodes, a_gang(2, 8), used=used) is not None


def test_preferred_rack_falls_back_to_the_block():
    nodes = rack_fleet(blocks=1, racks=2, nodes=2)
    used = [("b0r0n0", 8), ("b0r1n0", 8)]
    placed = place(nodes, a_gang(2, 8).requires("block", preferred="rack"), used=used)
    assert sorted(placed) == ["b0r0n1", "b0r1n1"]


def test_a_multi_pod_gang_that_fits_one_rack_stays_in_it():
    nodes = rack_fleet(blocks=1, racks=4, nodes=4)
    used = [(f"b0r{r}n{n}", 8) for r in (0, 1, 2) for n in (0, 1)]
    placed = place(nodes, a_gang(4, 8), used=used)
    assert Counter(name[:4] for name in placed) == Counter({"b0r3": 4})


def test_the_naive_baseline_takes_the_first_nodes_by_name():
    nodes = [node("a"), node("b"), node("c")]
    assert place(nodes, a_gang(1, 2), used=[("c", 6)], topology_aware=False) == ["a"]
    assert place(nodes, a_gang(1, 2), used=[("c", 6)]) == ["c"]


def test_fragmentation_enough_free_gpus_but_no_whole_nodes():
    nodes = rack_fleet(racks=1, nodes=4)
    used = [(n.name, 4) for n in nodes]
    assert place(nodes, a_gang(2, 8), used=used) is None
    assert place(nodes, a_gang(4, 4), used=used) is not None
