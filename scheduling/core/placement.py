"""Gang placement: every pod on a node or none, in the smallest fitting domain, keeping whole nodes whole.

The fleet state keeps, for every topology domain and node class (flavor + taints), a histogram of
free GPUs per schedulable node. A gang's fit in a domain is answered on the histogram in
O(pods x GPUs-per-node) without scanning nodes; only the chosen domain is then scanned to name
the nodes. Both use the same greedy rule, so they always agree:

    pods largest first; each pod goes to the node with the fewest free GPUs that still holds it
    (best fit), so small pods fill partly used nodes and whole-node pods take whole free nodes.

Levels are tried finest first. Within a level the domain that breaks the fewest whole free nodes
wins, then the one left with the fewest free GPUs (tightest), then the key (stable). A coarser
level is taken only when it breaks fewer whole nodes (or the finer one does not fit), unless the
job named a preferred level, which then wins whenever it fits.

Under the admin's option SchedulerConfig.single_pods_beside_long_runners a one-pod job takes, within its domain, the
partly used node whose longest-running pod started first instead of the tightest. It still breaks a whole node only
when no partly used node holds it, so the domain's score (whole nodes broken, GPUs left) is the same as best fit's.
"""

from __future__ import annotations

import math
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from scheduling.core.model import FLEET, Job, Node, PodPlacement, Snapshot, TopologyRequest
from scheduling.core.topology import Domain, build_domains, levels_to_try

NodeClass = tuple[str, tuple]  # (flavor, taints)


@dataclass(frozen=True, slots=True)
class PlacedPod:
    pod_set: str
    index: int
    node_index: int


@dataclass(frozen=True, slots=True)
class GangPlacement:
    domain: Domain
    pods: tuple[PlacedPod, ...]
    gpus_per_pod: tuple[int, ...]


class _DomainState:
    __slots__ = ("domain", "histograms", "free_gpus", "whole_nodes")

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.histograms: dict[int, list[int]] = {}
        self.free_gpus: dict[int, int] = {}
        self.whole_nodes: dict[int, int] = {}


class FleetState:
    """Free GPUs per node and per domain; mutated as the cycle admits and evicts gangs."""

    def __init__(
        self, nodes: Sequence[Node], topology: tuple[str, ...], *, topology_aware: bool = True,
        single_pods_fleet_wide: bool = True, single_pods_beside_long_runners: bool = False,
    ) -> None:
        self.nodes = tuple(nodes)
        self.single_pods_fleet_wide = single_pods_fleet_wide
        self.single_pods_beside_long_runners = single_pods_beside_long_runners
        self.topology = topology
        self.topology_aware = topology_aware
        self.index_of = {node.name: i for i, node in enumerate(self.nodes)}
        self.free = [node.allocatable_gpus - node.external_gpus for node in self.nodes]
        self.starts: list[dict[float, int]] = [{} for _ in self.nodes]
        """Per node: the start times of the pods on it, with their counts (math.inf: not started yet); kept only
        for SchedulerConfig.single_pods_beside_long_runners, the one reader."""
        self.is_schedulable = [node.is_ready and not node.is_cordoned for node in self.nodes]
        self.class_ids: dict[NodeClass, int] = {}
        self.node_class = [self._class_id(node) for node in self.nodes]
        self.class_width = [0] * len(self.class_ids)
        for i, node in enumerate(self.nodes):
            c = self.node_class[i]
            self.class_width[c] = max(self.class_width[c], node.allocatable_gpus)
        self.domains = build_domains(topology, self.nodes)
        self.domain_by_key = {d.key: d for domains in self.domains.values() for d in domains}
        self._domain_states: dict[str, list[_DomainState]] = {}
        self._state_by_key: dict[str, _DomainState] = {}
        self._states: list[_DomainState] = []
        self._level_ix: dict[str, tuple[int, ...]] = {}
        node_domain_ix: list[list[int]] = [[] for _ in self.nodes]
        for level, domains in self.domains.items():
            states = []
            for domain in domains:
                state = _DomainState(domain)
                for i in domain.node_indices:
                    node_domain_ix[i].append(len(self._states))
                    if self.is_schedulable[i]:
                        self._count(state, i, +1)
                states.append(state)
                self._state_by_key[domain.key] = state
                self._states.append(state)
            self._domain_states[level] = states
            self._level_ix[level] = tuple(range(len(self._states) - len(states), len(self._states)))
        self._node_domain_ix = [tuple(ix) for ix in node_domain_ix]
        self._tolerated_cache: dict[tuple, tuple[int, ...]] = {}
        self._pods_cache: dict[tuple, tuple[tuple[str, int], ...]] = {}

    def copy(self) -> "FleetState":
        """An independent copy for one cycle to mutate; immutable parts (nodes, domains, classes) are shared."""
        new = object.__new__(FleetState)
        new.__dict__.update(self.__dict__)
        new.free = list(self.free)
        if self.single_pods_beside_long_runners:
            new.starts = [dict(starts) if starts else {} for starts in self.starts]
        states = []
        for state in self._states:
            c = _DomainState(state.domain)
            c.histograms = {k: v[:] for k, v in state.histograms.items()}
            c.free_gpus = state.free_gpus.copy()
            c.whole_nodes = state.whole_nodes.copy()
            states.append(c)
        new._states = states
        new._domain_states = {level: [states[k] for k in ix] for level, ix in self._level_ix.items()}
        new._state_by_key = {state.domain.key: state for state in states}
        return new

    def _class_id(self, node: Node) -> int:
        return self.class_ids.setdefault((node.flavor, node.taints), len(self.class_ids))

    def _count(self, state: _DomainState, i: int, sign: int) -> None:
        c = self.node_class[i]
        histogram = state.histograms.get(c)
        if histogram is None:
            histogram = state.histograms[c] = [0] * (self.class_width[c] + 1)
            state.free_gpus[c] = 0
            state.whole_nodes[c] = 0
        free = min(max(self.free[i], 0), len(histogram) - 1)
        histogram[free] += sign
        state.free_gpus[c] += sign * free
        if self.is_whole_free(i):
            state.whole_nodes[c] += sign

    # --- queries -------------------------------------------------------------------------

    def is_whole_free(self, i: int) -> bool:
        node = self.nodes[i]
        return node.allocatable_gpus > 0 and self.free[i] == node.allocatable_gpus

    def tolerated_classes(self, job: Job) -> tuple[int, ...]:
        key = (job.flavor, job.tolerations)
        cached = self._tolerated_cache.get(key)
        if cached is None:
            cached = tuple(
                c
                for (flavor, taints), c in self.class_ids.items()
                if flavor == job.flavor
                and all(any(t.tolerates(taint) for t in job.tolerations) for taint in taints)
            )
            self._tolerated_cache[key] = cached
        return cached

    def oldest_start(self, i: int) -> float:
        """When the longest-running pod on the node started (math.inf: none has started)."""
        return min(self.starts[i], default=math.inf)

    def domain_keys_of(self, i: int) -> list[str]:
        return [self._states[k].domain.key for k in self._node_domain_ix[i]]

    def free_gpus_in(self, domain: Domain, classes: Iterable[int]) -> int:
        state = self._state_by_key[domain.key]
        return sum(state.free_gpus.get(c, 0) for c in classes)

    def is_eligible(self, i: int, classes: Iterable[int]) -> bool:
        return self.is_schedulable[i] and self.node_class[i] in classes

    # --- mutation ------------------------------------------------------------------------

    def allocate(self, i: int, gpus: int) -> None:
        self._shift(i, -gpus)

    def release(self, i: int, gpus: int) -> None:
        self._shift(i, +gpus)

    def _shift(self, i: int, delta: int) -> None:
        # The hot path of every admission and release: one histogram move per domain holding the node
        # (it was counted there when the state was built, as every schedulable node is).
        before = self.free[i]
        after = self.free[i] = before + delta
        if not self.is_schedulable[i]:
            return
        c = self.node_class[i]
        top = self.class_width[c]
        allocatable = self.nodes[i].allocatable_gpus
        was, now = min(max(before, 0), top), min(max(after, 0), top)
        whole = (allocatable > 0 and after == allocatable) - (allocatable > 0 and before == allocatable)
        states = self._states
        for k in self._node_domain_ix[i]:
            state = states[k]
            histogram = state.histograms[c]
            histogram[was] -= 1
            histogram[now] += 1
            state.free_gpus[c] += now - was
            if whole:
                state.whole_nodes[c] += whole

    def allocate_nodes(self, gpus_by_node: Iterable[tuple[int, int]]) -> None:
        """(node index, GPUs) pairs, as the preemption planner keeps its victims' pods."""
        for i, gpus in gpus_by_node:
            self._shift(i, -gpus)

    def release_nodes(self, gpus_by_node: Iterable[tuple[int, int]]) -> None:
        for i, gpus in gpus_by_node:
            self._shift(i, +gpus)

    @contextmanager
    def holding_back(self, nodes: Iterable[int]) -> Iterator[None]:
        """Within the block, the free GPUs of `nodes` count as taken (a drain keeps a job off them)."""
        held = [(i, self.free[i]) for i in nodes if self.free[i] > 0]
        self.allocate_nodes(held)
        try:
            yield
        finally:
            self.release_nodes(held)

    def allocate_placement(self, placement: Iterable[PodPlacement], job: Job) -> None:
        for pod, gpus in _pods_with_gpus(placement, job):
            if pod.node in self.index_of:
                i = self.index_of[pod.node]
                self.allocate(i, gpus)
                self._count_start(i, job.started_at, +1)

    def release_placement(self, placement: Iterable[PodPlacement], job: Job) -> None:
        for pod, gpus in _pods_with_gpus(placement, job):
            if pod.node in self.index_of:
                i = self.index_of[pod.node]
                self.release(i, gpus)
                self._count_start(i, job.started_at, -1)

    def commit(self, placement: GangPlacement, started_at: float | None = None) -> tuple[PodPlacement, ...]:
        """Allocate the gang's pods, which start at `started_at` (None: not yet known)."""
        for pod, gpus in zip(placement.pods, placement.gpus_per_pod):
            self.allocate(pod.node_index, gpus)
            self._count_start(pod.node_index, started_at, +1)
        return tuple(PodPlacement(p.pod_set, p.index, self.nodes[p.node_index].name) for p in placement.pods)

    def _count_start(self, i: int, started_at: float | None, sign: int) -> None:
        if not self.single_pods_beside_long_runners:
            return
        starts = self.starts[i]
        key = math.inf if started_at is None else started_at
        count = starts.get(key, 0) + sign
        if count > 0:
            starts[key] = count
        else:
            starts.pop(key, None)

    # --- placement -----------------------------------------------------------------------

    def place(self, job: Job, *, levels: Sequence[str] | None = None, within: Domain | None = None) -> GangPlacement | None:
        """Where the whole gang would go now, or None. Does not change the state."""
        if not self.topology_aware:
            return self._first_fit(job)
        chosen = self._choose_domain(job, levels, within)
        return self._assign(*chosen) if chosen is not None else None

    def fits(self, job: Job, *, levels: Sequence[str] | None = None, within: Domain | None = None) -> bool:
        """Whether `place` would find a placement: answered on the histograms, without naming the nodes (the
        preemption planner asks this thousands of times per plan)."""
        if not self.topology_aware:
            return self._first_fit(job) is not None
        return self._choose_domain(job, levels, within) is not None

    def _choose_domain(self, job: Job, levels: Sequence[str] | None, within: Domain | None):
        """The domain state the gang goes to, with its tolerated classes and pods largest first; or None."""
        classes = self.tolerated_classes(job)
        if not classes:
            return None
        pods = self._pods_cache.get(job.pod_sets)
        if pods is None:
            pods = self._pods_cache[job.pod_sets] = _pods_largest_first(job)
        if within is not None and within.level == FLEET and job.topology.required:
            within = None  # a plan only quota blocked names the fleet: the gang still goes inside its required level
        if within is not None:
            best, _ = self._best_domain([self._state_by_key[within.key]], classes, pods, job.gpus)
            return (best, classes, pods) if best else None
        # A preferred level is a promise of locality: the first level that fits wins. Without one,
        # a coarser domain wins only if it breaks fewer whole nodes than the finer one would.
        locality_first = job.topology.preferred is not None
        if self.single_pods_fleet_wide and levels is None and len(pods) == 1 and job.topology == TopologyRequest():
            levels = (FLEET,)  # SchedulerConfig.single_pods_fleet_wide
        chosen, chosen_score = None, None
        for level in levels or levels_to_try(self.topology, job.topology):
            best, score = self._best_domain(self._domain_states.get(level, ()), classes, pods, job.gpus)
            if best is None:
                continue
            if chosen is None or score[0] < chosen_score[0]:
                chosen, chosen_score = best, score
            if locality_first or chosen_score[0] == 0:
                break
        return (chosen, classes, pods) if chosen is not None else None

    def _best_domain(self, states, classes, pods, demand_gpus) -> tuple[_DomainState | None, tuple | None]:
        best, best_score = None, None
        for state in states:
            if sum(state.free_gpus.get(c, 0) for c in classes) < demand_gpus:
                continue
            score = self._fit_score(state, classes, pods)
            if score is not None and (best_score is None or score < best_score):
                best, best_score = state, score
        return best, best_score

    def _fit_score(self, state: _DomainState, classes, pods) -> tuple | None:
        """(whole nodes broken, free GPUs left) if the gang fits by the greedy rule, else None."""
        if len(classes) == 1:  # the common case: no merging of histograms
            c = classes[0]
            histogram = state.histograms.get(c)
            if histogram is None:
                return None
            histogram = histogram[:]
            width = len(histogram) - 1
            free_left = state.free_gpus[c]
            whole_left = state.whole_nodes[c]
        else:
            width = max(self.class_width[c] for c in classes)
            histogram = [0] * (width + 1)
            for c in classes:
                for free, count in enumerate(state.histograms.get(c, ())):
                    histogram[free] += count
            free_left = sum(state.free_gpus.get(c, 0) for c in classes)
            whole_left = sum(state.whole_nodes.get(c, 0) for c in classes)
        broken = 0
        for _pod_set, gpus in pods:
            free = gpus
            while free <= width and histogram[free] == 0:
                free += 1
            if free > width:
                return None
            histogram[free] -= 1
            histogram[free - gpus] += 1
            if free == width and whole_left > 0:
                whole_left -= 1
                broken += gpus < width
            free_left -= gpus
        return (broken, free_left, state.domain.key)

    def _assign(self, state: _DomainState, classes, pods) -> GangPlacement:
        if len(pods) == 1:
            if self.single_pods_beside_long_runners:
                return self._beside_long_runners(state, classes, *pods[0])
            return self._tightest(state, classes, *pods[0])
        buckets: dict[int, deque[int]] = {}
        smallest = min(gpus for _, gpus in pods)
        for i in state.domain.node_indices:
            if self.is_eligible(i, classes) and self.free[i] >= smallest:
                buckets.setdefault(self.free[i], deque()).append(i)
        width = max(buckets) if buckets else 0
        placed, sizes, next_index = [], [], {}
        for pod_set, gpus in pods:
            free = gpus
            while free <= width and not buckets.get(free):
                free += 1
            i = buckets[free].popleft()
            buckets.setdefault(free - gpus, deque()).appendleft(i)
            index = next_index.get(pod_set, 0)
            next_index[pod_set] = index + 1
            placed.append(PlacedPod(pod_set, index, i))
            sizes.append(gpus)
        return GangPlacement(state.domain, tuple(placed), tuple(sizes))

    def _tightest(self, state: _DomainState, classes, pod_set: str, gpus: int) -> GangPlacement:
        """One pod on the eligible node with the fewest free GPUs that hold it, the first in the domain's order: what the
        buckets below choose for a single pod, in one pass and without building them (most jobs are one pod)."""
        free, is_schedulable, node_class = self.free, self.is_schedulable, self.node_class
        chosen, chosen_free = -1, math.inf
        for i in state.domain.node_indices:
            left = free[i]
            if gpus <= left < chosen_free and is_schedulable[i] and node_class[i] in classes:
                chosen, chosen_free = i, left
                if left == gpus:
                    break
        return GangPlacement(state.domain, (PlacedPod(pod_set, 0, chosen),), (gpus,))

    def _beside_long_runners(self, state: _DomainState, classes, pod_set: str, gpus: int) -> GangPlacement:
        """SchedulerConfig.single_pods_beside_long_runners: a partly used node before a whole one; among those, the one
        whose longest-running pod started first; then the tightest."""
        free, is_eligible, is_whole_free, oldest_start = self.free, self.is_eligible, self.is_whole_free, self.oldest_start
        chosen = min(
            (i for i in state.domain.node_indices if free[i] >= gpus and is_eligible(i, classes)),
            key=lambda i: (is_whole_free(i), oldest_start(i), free[i], i),
        )
        return GangPlacement(state.domain, (PlacedPod(pod_set, 0, chosen),), (gpus,))

    def _first_fit(self, job: Job) -> GangPlacement | None:
        """The naive baseline: pods in order, each on the first node by name that holds it."""
        classes = self.tolerated_classes(job)
        fleet = self.domains[FLEET][0]
        trial = list(self.free)
        placed, sizes = [], []
        for pod_set in job.pod_sets:
            for index in range(pod_set.count):
                for i in fleet.node_indices:
                    if trial[i] >= pod_set.gpus_per_pod and self.is_eligible(i, classes):
                        trial[i] -= pod_set.gpus_per_pod
                        placed.append(PlacedPod(pod_set.name, index, i))
                        sizes.append(pod_set.gpus_per_pod)
                        break
                else:
                    return None
        return GangPlacement(fleet, tuple(placed), tuple(sizes))


def _pods_largest_first(job: Job) -> tuple[tuple[str, int], ...]:
    pods = [(ps.name, ps.gpus_per_pod) for ps in job.pod_sets for _ in range(ps.count)]
    pods.sort(key=lambda pod: -pod[1])
    return tuple(pods)


def _pods_with_gpus(placement: Iterable[PodPlacement], job: Job):
    gpus_per_pod = {ps.name: ps.gpus_per_pod for ps in job.pod_sets}
    for pod in placement:
        yield pod, gpus_per_pod.get(pod.pod_set, 0)


def fleet_state_for(snapshot: Snapshot) -> FleetState:
    """The snapshot's nodes, empty, under its config's placement rules."""
    config = snapshot.config
    return FleetState(snapshot.nodes, snapshot.topology, topology_aware=config.topology_aware,
                      single_pods_fleet_wide=config.single_pods_fleet_wide,
                      single_pods_beside_long_runners=config.single_pods_beside_long_runners)
