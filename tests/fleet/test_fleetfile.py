"""Fleet files: validation names the node and the field; loadfleet syncs all or nothing."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.management import CommandError, call_command

from scheduling.fleetfile import FleetFileError, demo_fleet, fleet_parse
from scheduling.models import FleetSettings, Node
from scheduling.services import reconcile_pass_run, job_submit
from tests.conftest import H100


def node(name="gpu-0001", **overrides) -> dict:
    base = {"name": name, "flavor": H100, "gpus": 8, "labels": {"block": "b1", "rack": "b1-r01"}}
    base.update(overrides)
    return base


def doc(*nodes, topology=("block", "rack")) -> dict:
    return {"topology": list(topology), "nodes": list(nodes) or [node()]}


@pytest.mark.parametrize(
    "bad, expected",
    [
        pytest.param(node(gpus=0), "node 'gpu-0001': field 'gpus'", id="zero gpus"),
        pytest.param(node(gpus="eight"), "node 'gpu-0001': field 'gpus'", id="gpus not a number"),
        pytest.param(node(allocatable=9), "node 'gpu-0001': field 'allocatable': 9 exceeds gpus 8", id="allocatable above capacity"),
        pytest.param(node(allocatable=-1), "node 'gpu-0001': field 'allocatable'", id="negative allocatable"),
        pytest.param(node(external_gpus=9), "node 'gpu-0001': field 'external_gpus'", id="external above allocatable"),
        pytest.param(node(flavor=""), "node 'gpu-0001': field 'flavor'", id="missing flavor"),
        pytest.param(node(labels={"block": "b1"}), "node 'gpu-0001': field 'labels': missing topology label 'rack'", id="missing topology label"),
        pytest.param(node(ready="yes"), "node 'gpu-0001': field 'ready'", id="ready not a boolean"),
        pytest.param(node(taints=[{"key": "k", "effect": "Sometimes"}]), "node 'gpu-0001': field 'taints[0].effect'", id="bad taint effect"),
        pytest.param(node(taints=[{"value": "v"}]), "node 'gpu-0001': field 'taints[0]'", id="taint without key"),
        pytest.param(node(colour="red"), "node 'gpu-0001': field 'colour': unknown field", id="unknown field"),
        pytest.param({"flavor": H100, "gpus": 8}, "nodes[0]: field 'name'", id="missing name"),
    ],
)
def test_validation_errors_name_the_node_and_the_field(bad, expected):
    with pytest.raises(FleetFileError) as error:
        fleet_parse(doc(bad))
    assert any(expected in message for message in error.value.errors), error.value.errors


def test_duplicate_names_and_bad_topology_are_reported_together():
    with pytest.raises(FleetFileError) as error:
        fleet_parse({"topology": "rack", "nodes": [node(), node()]})
    text = "\n".join(error.value.errors)
    assert "field 'topology'" in text and "node 'gpu-0001': field 'name': duplicate" in text


def test_a_valid_file_parses_with_defaults():
    spec = fleet_parse(doc(node(), node("gpu-0002", allocatable=6, unschedulable=True, taints=[{"key": "k", "value": "v"}])))
    assert spec.topology == ("block", "rack")
    first, second = spec.nodes
    assert (first.allocatable_gpus, first.is_ready, first.is_unschedulable, first.external_gpus) == (8, True, False, 0)
    assert (second.allocatable_gpus, second.is_unschedulable, second.taints) == (6, True, [{"key": "k", "value": "v", "effect": "NoSchedule"}])


def test_the_demo_fleet_has_1024_h100_in_two_blocks_of_four_racks():
    spec = demo_fleet()
    h100 = [n for n in spec.nodes if n.flavor == H100]
    assert sum(n.capacity_gpus for n in h100) == 1024
    assert {n.labels["block"] for n in h100} == {"b1", "b2"} and len({n.labels["rack"] for n in h100}) == 8
    assert any(n.flavor == "A100-80GB" for n in spec.nodes)


@pytest.fixture
def write(tmp_path):
    def make(data, suffix=".yaml"):
        path = tmp_path / f"fleet{suffix}"
        path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
        return str(path)

    return make


def test_loadfleet_adds_updates_and_removes(db, write):
    call_command("loadfleet", write(doc(node("a"), node("b"), node("c"))))
    assert sorted(Node.objects.values_list("name", flat=True)) == ["a", "b", "c"]
    assert FleetSettings.load().topology_levels == ["block", "rack"]
    call_command("loadfleet", write(doc(node("a", allocatable=4), node("b"), node("d")), suffix=".json"))
    assert sorted(Node.objects.values_list("name", flat=True)) == ["a", "b", "d"]
    assert Node.objects.get(name="a").allocatable_gpus == 4


def test_an_invalid_file_changes_nothing(db, write):
    call_command("loadfleet", write(doc(node("a"), node("b"))))
    before = list(Node.objects.order_by("name").values())
    with pytest.raises(CommandError, match="node 'c': field 'gpus'"):
        call_command("loadfleet", write(doc(node("a", allocatable=2), node("c", gpus=-1))))
    assert list(Node.objects.order_by("name").values()) == before


def test_unreadable_and_malformed_files_are_rejected(db, tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("loadfleet", str(tmp_path / "missing.yaml"))
    broken = tmp_path / "broken.json"
    broken.write_text("{nodes: [")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("loadfleet", str(broken))


def test_removing_a_node_that_holds_a_placement_is_an_error_and_changes_nothing(org, write):
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="j",
               pod_sets=[{"name": "w", "count": 8, "gpus_per_pod": 8}])
    reconcile_pass_run()
    names = sorted(Node.objects.values_list("name", flat=True))
    with pytest.raises(CommandError, match="cannot remove"):
        call_command("loadfleet", write(doc(node("only-one"))))
    assert sorted(Node.objects.values_list("name", flat=True)) == names
