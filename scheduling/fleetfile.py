"""The fleet file format (YAML or JSON): parsing, validation with node+field errors, and the built-in demo fleet."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
NODE_FIELDS = {"name", "flavor", "gpus", "allocatable", "labels", "ready", "unschedulable", "taints", "external_gpus"}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    flavor: str
    capacity_gpus: int
    allocatable_gpus: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    is_ready: bool = True
    is_unschedulable: bool = False
    external_gpus: int = 0


@dataclass(frozen=True)
class FleetSpec:
    topology: tuple[str, ...]
    nodes: tuple[NodeSpec, ...]


class FleetFileError(ValueError):
    """The fleet file is invalid; `errors` lists every problem, each naming the node and the field."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("invalid fleet file:\n  " + "\n  ".join(errors))


def fleet_load(path: str | Path) -> FleetSpec:
    """Read and validate a fleet file; JSON when it ends in .json, YAML otherwise (YAML also reads JSON)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise FleetFileError([f"{path}: cannot read: {error.strerror or error}"]) from error
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise FleetFileError([f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}"]) from error
    return fleet_parse(data)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def fleet_parse(data: Any) -> FleetSpec:
    """Validate a decoded fleet document. Raises FleetFileError naming node and field for every problem."""
    errors: list[str] = []
    if not isinstance(data, dict):
        raise FleetFileError(["fleet file: top level must be a mapping with 'topology' and 'nodes'"])
    unknown = set(data) - {"topology", "nodes"}
    if unknown:
        errors.append(f"fleet file: unknown keys {sorted(unknown)}")
    topology = data.get("topology", [])
    if not isinstance(topology, list) or not all(isinstance(level, str) and level for level in topology):
        errors.append("field 'topology': must be a list of label keys, coarsest first")
        topology = []
    elif len(set(topology)) != len(topology):
        errors.append("field 'topology': levels must be distinct")
    if {"node", "fleet"} & set(topology):
        errors.append("field 'topology': 'node' and 'fleet' are implicit levels, not label keys")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        errors.append("field 'nodes': must be a non-empty list")
        raise FleetFileError(errors)

    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_nodes):
        label = f"nodes[{position}]"
        if not isinstance(raw, dict):
            errors.append(f"{label}: must be a mapping")
            continue
        name = raw.get("name")
        if isinstance(name, str) and name:
            label = f"node {name!r}"
            if name in seen:
                errors.append(f"{label}: field 'name': duplicate node name")
            seen.add(name)
        else:
            errors.append(f"{label}: field 'name': required, a non-empty string")
        node_errors_before = len(errors)
        for key in sorted(set(raw) - NODE_FIELDS):
            errors.append(f"{label}: field {key!r}: unknown field")
        flavor = raw.get("flavor")
        if not isinstance(flavor, str) or not flavor:
            errors.append(f"{label}: field 'flavor': required, a non-empty string")
        gpus = raw.get("gpus")
        if not _is_int(gpus) or gpus <= 0:
            errors.append(f"{label}: field 'gpus': required, a positive integer")
            gpus = None
        allocatable = raw.get("allocatable", gpus)
        if allocatable is not None and (not _is_int(allocatable) or allocatable < 0):
            errors.append(f"{label}: field 'allocatable': must be an integer ≥ 0")
        elif gpus is not None and allocatable > gpus:
            errors.append(f"{label}: field 'allocatable': {allocatable} exceeds gpus {gpus}")
        external = raw.get("external_gpus", 0)
        if not _is_int(external) or external < 0:
            errors.append(f"{label}: field 'external_gpus': must be an integer ≥ 0")
        elif _is_int(allocatable) and external > allocatable:
            errors.append(f"{label}: field 'external_gpus': {external} exceeds allocatable {allocatable}")
        labels = raw.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, (str, int)) for k, v in labels.items()):
            errors.append(f"{label}: field 'labels': must be a mapping of strings")
            labels = {}
        else:
            labels = {k: str(v) for k, v in labels.items()}
            for level in topology:
                if not labels.get(level):
                    errors.append(f"{label}: field 'labels': missing topology label {level!r}")
        for flag in ("ready", "unschedulable"):
            if flag in raw and not isinstance(raw[flag], bool):
                errors.append(f"{label}: field {flag!r}: must be true or false")
        taints = raw.get("taints", [])
        if not isinstance(taints, list):
            errors.append(f"{label}: field 'taints': must be a list")
            taints = []
        clean_taints = []
        for i, taint in enumerate(taints):
            if not isinstance(taint, dict) or not isinstance(taint.get("key"), str) or not taint.get("key"):
                errors.append(f"{label}: field 'taints[{i}]': needs a non-empty 'key'")
                continue
            effect = taint.get("effect", "NoSchedule")
            if effect not in TAINT_EFFECTS:
                errors.append(f"{label}: field 'taints[{i}].effect': {effect!r} is not one of {sorted(TAINT_EFFECTS)}")
                continue
            clean_taints.append({"key": taint["key"], "value": str(taint.get("value", "")), "effect": effect})
        if len(errors) == node_errors_before and isinstance(name, str) and name:
            nodes.append(
                NodeSpec(
                    name=name,
                    flavor=flavor,
                    capacity_gpus=gpus,
                    allocatable_gpus=allocatable,
                    labels=labels,
                    taints=clean_taints,
                    is_ready=raw.get("ready", True),
                    is_unschedulable=raw.get("unschedulable", False),
                    external_gpus=external,
                )
            )
    if errors:
        raise FleetFileError(errors)
    return FleetSpec(topology=tuple(topology), nodes=tuple(nodes))


def demo_fleet() -> FleetSpec:
    """1,024 H100 GPUs (blocks b1, b2 × 4 racks × 16 nodes × 8) plus 64 A100 GPUs (block b3, 2 racks × 4 nodes)."""
    nodes: list[NodeSpec] = []
    number = 0
    for block in ("b1", "b2"):
        for rack in range(1, 5):
            for _ in range(16):
                number += 1
                nodes.append(
                    NodeSpec(
                        name=f"h100-{number:04d}",
                        flavor="H100-80GB",
                        capacity_gpus=8,
                        allocatable_gpus=8,
                        labels={"block": block, "rack": f"{block}-r{rack:02d}"},
                    )
                )
    for number in range(1, 9):
        rack = (number - 1) // 4 + 1
        nodes.append(
            NodeSpec(
                name=f"a100-{number:04d}",
                flavor="A100-80GB",
                capacity_gpus=8,
                allocatable_gpus=8,
                labels={"block": "b3", "rack": f"b3-r{rack:02d}"},
            )
        )
    return FleetSpec(topology=("block", "rack"), nodes=tuple(nodes))
