"""Fragmentation metrics: how much of the free capacity whole-node gangs can still use, per domain.

- whole free nodes: schedulable nodes with every allocatable GPU free;
- scattered GPUs: free GPUs on partly used nodes, usable only by pods smaller than a node;
- largest placeable gang: for each pod size, the most pods of that size one domain still holds
  (a pod never spans nodes, so a node with f free GPUs holds f // size pods).
The same numbers choose placements (keep whole nodes whole) and explain pending gangs.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.core.model import FLEET
from scheduling.core.placement import FleetState

POD_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class DomainFragmentation:
    level: str
    key: str
    free_gpus: int
    whole_free_nodes: int
    scattered_gpus: int
    """Free GPUs on partly used nodes."""
    largest_gang_pods: dict[int, int]
    """Pod size in GPUs -> the most pods of that size this domain still holds."""


@dataclass(frozen=True, slots=True)
class FragmentationReport:
    flavor: str
    free_gpus: int
    whole_free_nodes: int
    scattered_gpus: int
    partly_used_nodes: int
    domains: tuple[DomainFragmentation, ...]

    def largest_gang_pods(self, pod_gpus: int, level: str = FLEET) -> int:
        return max((d.largest_gang_pods.get(pod_gpus, 0) for d in self.domains if d.level == level), default=0)


def measure(fleet: FleetState, flavor: str) -> FragmentationReport:
    domains = []
    for level, level_domains in fleet.domains.items():
        for domain in level_domains:
            domains.append(_measure_domain(fleet, flavor, level, domain.key, domain.node_indices))
    fleet_domain = next(d for d in domains if d.level == FLEET)
    partly_used = sum(
        1
        for i, node in enumerate(fleet.nodes)
        if node.flavor == flavor and fleet.is_schedulable[i] and 0 < fleet.free[i] and not fleet.is_whole_free(i)
    )
    return FragmentationReport(
        flavor=flavor,
        free_gpus=fleet_domain.free_gpus,
        whole_free_nodes=fleet_domain.whole_free_nodes,
        scattered_gpus=fleet_domain.scattered_gpus,
        partly_used_nodes=partly_used,
        domains=tuple(domains),
    )


def _measure_domain(fleet: FleetState, flavor: str, level: str, key: str, members) -> DomainFragmentation:
    free_gpus = whole = scattered = 0
    pods = dict.fromkeys(POD_SIZES, 0)
    for i in members:
        node = fleet.nodes[i]
        if node.flavor != flavor or not fleet.is_schedulable[i]:
            continue
        free = max(0, fleet.free[i])
        free_gpus += free
        if fleet.is_whole_free(i):
            whole += 1
        else:
            scattered += free
        for size in POD_SIZES:
            pods[size] += free // size
    return DomainFragmentation(level, key, free_gpus, whole, scattered, pods)
