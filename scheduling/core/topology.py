"""Topology domains: which nodes share a block, a rack, the fleet; and the order levels are tried in."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.core.model import FLEET, Node, TopologyRequest


@dataclass(frozen=True, slots=True)
class Domain:
    level: str
    key: str
    """Human-readable path, e.g. "block=b1/rack=b1-r03"; "fleet" for the whole fleet."""
    node_indices: tuple[int, ...]


def build_domains(topology: tuple[str, ...], nodes: tuple[Node, ...]) -> dict[str, list[Domain]]:
    """Every domain of every level, nodes in name order, domains in key order (stable tie-breaks)."""
    order = sorted(range(len(nodes)), key=lambda i: nodes[i].name)
    by_level: dict[str, list[Domain]] = {FLEET: [Domain(FLEET, FLEET, tuple(order))]}
    for depth, level in enumerate(topology):
        groups: dict[str, list[int]] = {}
        for i in order:
            labels = nodes[i].labels
            key = "/".join(f"{name}={labels.get(name, '')}" for name in topology[: depth + 1])
            groups.setdefault(key, []).append(i)
        by_level[level] = [Domain(level, key, tuple(members)) for key, members in sorted(groups.items())]
    return by_level


def levels_to_try(topology: tuple[str, ...], request: TopologyRequest) -> list[str]:
    """Finest first: from `preferred` (or the finest level) up to `required` (or the whole fleet).

    With no request the smallest domain that holds the gang still wins, because the finest
    level is tried first.
    """
    finest_first = [*reversed(topology), FLEET]
    start = finest_first.index(request.preferred) if request.preferred in finest_first else 0
    stop = finest_first.index(request.required) if request.required in finest_first else len(finest_first) - 1
    if start > stop:
        start = stop
    return finest_first[start : stop + 1]
