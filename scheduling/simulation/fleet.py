"""Fleets and quotas for a replay: generated for Philly, read from a fleet file or an openb-style node list.

Philly has no topology data, so its nodes are grouped into racks of `RACK_SIZE` consecutive
nodes (8 nodes = 64 GPUs per rack), VC after VC in the order of the VC table, so a VC's nodes are
contiguous. `scale` shrinks every VC (and so the fleet and every quota) by the same factor.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from scheduling.core.model import Node, Taint

RACK_SIZE = 8
PHILLY_FLAVOR = "philly-gpu"
PHILLY_GPUS_PER_NODE = 8
PARTITION_TAINT = "gangway.io/partition"


class FleetError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Fleet:
    topology: tuple[str, ...]
    nodes: tuple[Node, ...]
    owners: Mapping[str, str] | None = None
    """Node name → team whose partition it is, when the source defines partitions (Philly VCs)."""

    @property
    def gpus(self) -> int:
        return sum(node.allocatable_gpus for node in self.nodes)

    def gpus_by_flavor(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for node in self.nodes:
            totals[node.flavor] = totals.get(node.flavor, 0) + node.allocatable_gpus
        return totals

    @property
    def main_flavor(self) -> str:
        totals = self.gpus_by_flavor()
        return max(sorted(totals), key=lambda flavor: totals[flavor])

    def node_width(self, flavor: str) -> int:
        return max((n.allocatable_gpus for n in self.nodes if n.flavor == flavor), default=0)


def scaled_count(count: int, scale: float) -> int:
    return max(1, round(count * scale)) if count else 0


def philly_fleet(vc_nodes: Mapping[str, int], *, scale: float = 1.0, rack_size: int = RACK_SIZE) -> tuple[Fleet, dict[str, int]]:
    """8-GPU nodes, VC after VC, racks of `rack_size` nodes; quotas = each VC's (scaled) nodes × 8."""
    nodes, owners, quotas = [], {}, {}
    for vc, count in vc_nodes.items():
        count = scaled_count(count, scale)
        quotas[vc] = count * PHILLY_GPUS_PER_NODE
        for _ in range(count):
            i = len(nodes)
            name = f"n{i + 1:04d}"
            nodes.append(Node(name, PHILLY_FLAVOR, PHILLY_GPUS_PER_NODE, PHILLY_GPUS_PER_NODE, {"rack": f"r{i // rack_size + 1:03d}"}))
            owners[name] = vc
    return Fleet(("rack",), tuple(nodes), owners), quotas


def fleet_from_file(path: str | Path, *, scale: float = 1.0) -> Fleet:
    """A fleet file in the `loadfleet` format (YAML or JSON: `topology` + `nodes`)."""
    from scheduling.fleetfile import FleetFileError, fleet_load  # pure parser (PyYAML); shared with loadfleet

    try:
        spec = fleet_load(path)
    except FleetFileError as error:
        raise FleetError(str(error)) from error
    nodes = tuple(
        Node(
            name=n.name,
            flavor=n.flavor,
            capacity_gpus=n.capacity_gpus,
            allocatable_gpus=n.allocatable_gpus,
            labels=dict(n.labels),
            taints=tuple(Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule")) for t in n.taints),
            is_ready=n.is_ready,
            is_cordoned=n.is_unschedulable,
            external_gpus=n.external_gpus,
        )
        for n in spec.nodes
    )
    return _scaled(Fleet(tuple(spec.topology), nodes), scale)


def fleet_from_node_list(path: str | Path, *, scale: float = 1.0, rack_size: int = RACK_SIZE) -> Fleet:
    """An openb-style node list CSV (`sn, …, gpu, model`): GPU nodes only, racks of `rack_size` per model."""
    path = Path(path)
    nodes, errors = [], []
    per_model: dict[str, int] = {}
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle, skipinitialspace=True)
        for line, row in enumerate(reader, start=2):
            try:
                name, gpus, model = row["sn"], int(row["gpu"]), (row.get("model") or "gpu").strip()
            except (KeyError, TypeError, ValueError):
                errors.append(f"line {line}: expected columns sn, gpu (integer), model")
                continue
            if gpus <= 0:
                continue
            k = per_model.get(model, 0)
            per_model[model] = k + 1
            nodes.append(Node(name, model, gpus, gpus, {"rack": f"{model}-r{k // rack_size + 1:03d}"}))
    if errors:
        raise FleetError(f"{path}: " + "; ".join(errors[:20]))
    if not nodes:
        raise FleetError(f"{path}: no GPU nodes")
    return _scaled(Fleet(("rack",), tuple(nodes)), scale)


def load_fleet(path: str | Path, *, scale: float = 1.0) -> Fleet:
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return fleet_from_node_list(path, scale=scale)
    return fleet_from_file(path, scale=scale)


def _scaled(fleet: Fleet, scale: float) -> Fleet:
    """Keep the first round(n × scale) nodes of every flavor (in name order)."""
    if scale == 1.0:
        return fleet
    by_flavor: dict[str, list[Node]] = {}
    for node in sorted(fleet.nodes, key=lambda n: n.name):
        by_flavor.setdefault(node.flavor, []).append(node)
    kept = tuple(n for nodes in by_flavor.values() for n in nodes[: scaled_count(len(nodes), scale)])
    return Fleet(fleet.topology, kept)


# --- quotas ------------------------------------------------------------------------------------


def load_quotas(path: str | Path, *, flavor: str, scale: float = 1.0) -> dict[str, dict[str, int]]:
    """CSV `team,gpus[,flavor]` → team → flavor → nominal GPUs (scaled)."""
    quotas: dict[str, dict[str, int]] = {}
    errors = []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle, skipinitialspace=True)
        if not reader.fieldnames or not {"team", "gpus"} <= set(reader.fieldnames):
            raise FleetError(f"{path}: line 1: expected columns team,gpus[,flavor]")
        for line, row in enumerate(reader, start=2):
            try:
                gpus = int(row["gpus"])
                if gpus < 0 or not row["team"]:
                    raise ValueError
            except (TypeError, ValueError):
                errors.append(f"line {line}: expected a team name and a non-negative integer, got {row}")
                continue
            quotas.setdefault(row["team"].strip(), {})[(row.get("flavor") or flavor).strip()] = round(gpus * scale)
    if errors:
        raise FleetError(f"{path}: " + "; ".join(errors[:20]))
    return quotas


def equal_quotas(teams: tuple[str, ...], fleet: Fleet) -> dict[str, dict[str, int]]:
    """Every flavor's GPUs shared in equal nominal quotas (the remainder to the first teams)."""
    quotas: dict[str, dict[str, int]] = {team: {} for team in teams}
    for flavor, total in fleet.gpus_by_flavor().items():
        share, extra = divmod(total, len(teams))
        for k, team in enumerate(teams):
            quotas[team][flavor] = share + (1 if k < extra else 0)
    return quotas


# --- fleets sized from a trace's load -----------------------------------------------------------

LOAD_FLAVOR = "gpu"
LOAD_GPUS_PER_NODE = 8
LOAD_BLOCKS = 2
LOAD_RACKS_PER_BLOCK = 8
LOAD_NODE_MULTIPLE = 4


def nodes_for_load(gpu_seconds: float, span_s: float, largest_job_gpus: int, load: float) -> int:
    """Nodes so the average demand over the span is `load` of capacity: ⌈demand ÷ load ÷ 8⌉, rounded up
    to a multiple of 4, and at least enough for the largest job."""
    if not 0 < load:
        raise ValueError(f"--load must be > 0, got {load}")
    demand_gpus = gpu_seconds / span_s if span_s > 0 else float(largest_job_gpus)
    nodes = max(math.ceil(demand_gpus / load / LOAD_GPUS_PER_NODE), math.ceil(largest_job_gpus / LOAD_GPUS_PER_NODE))
    return -(-nodes // LOAD_NODE_MULTIPLE) * LOAD_NODE_MULTIPLE


def fleet_for_load(nodes: int) -> Fleet:
    """`nodes` 8-GPU nodes in 2 blocks of 8 racks, filled rack by rack (contiguous names per rack)."""
    racks = LOAD_BLOCKS * LOAD_RACKS_PER_BLOCK
    built = []
    for i in range(nodes):
        rack = i * racks // nodes
        block = rack // LOAD_RACKS_PER_BLOCK
        labels = {"block": f"b{block + 1}", "rack": f"b{block + 1}-r{rack % LOAD_RACKS_PER_BLOCK + 1}"}
        built.append(Node(f"n{i + 1:04d}", LOAD_FLAVOR, LOAD_GPUS_PER_NODE, LOAD_GPUS_PER_NODE, labels))
    return Fleet(("block", "rack"), tuple(built))
