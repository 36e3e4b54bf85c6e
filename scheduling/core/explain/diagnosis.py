"""The four-level diagnosis of a pending job (quota → fit → nodes → health): the facts of each level, with their
numbers, against one fleet state and ledger, cached per shape."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from scheduling.core.defragmentation import jobs_on_nodes
from scheduling.core.explain.facts import (
    MAX_NAMED, BrokenNode, DomainFacts, FitFacts, FragmentationFacts, HealthFacts, NodeFacts, NodeReason, QuotaFacts,
)
from scheduling.core.fragmentation import measure
from scheduling.core.model import FLEET, Job, Node, Queue, Snapshot
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaCheck, QuotaLedger, QuotaLimit, cohort_of
from scheduling.core.reach import EmptyFleet, why_never_admitted
from scheduling.core.reasons import fit_message, free_capacity


class Diagnosis:
    """The facts of each level for the pending jobs of one snapshot, on the state after its cycle."""

    def __init__(self, snapshot: Snapshot, fleet: FleetState, ledger: QuotaLedger, holding: Iterable[Job]) -> None:
        self.snapshot = snapshot
        self.fleet = fleet
        self.ledger = ledger
        self.holding = {job.id: job for job in holding}
        self._relaxed: dict[str, FleetState] = {}
        self._empty_fleet: EmptyFleet | None = None
        self._jobs_on_node: list[list[Job]] | None = None
        self._quota_cache: dict[tuple, QuotaFacts] = {}
        self._borrowers_cache: dict[tuple, tuple] = {}
        self._place_cache: dict[tuple, bool] = {}
        self._fit_cache: dict[tuple, FitFacts] = {}
        self._nodes_cache: dict[tuple, NodeFacts] = {}
        self._health_cache: dict[str, HealthFacts] = {}
        self._fragmentation_cache: dict[str, object] = {}

    def quota(self, job: Job, queue: Queue | None) -> QuotaFacts:
        key = (job.queue, job.flavor, job.gpus)
        facts = self._quota_cache.get(key)
        if facts is None:
            facts = self._quota_cache[key] = self._quota_facts(job, queue)
        return facts

    def _quota_facts(self, job: Job, queue: Queue | None) -> QuotaFacts:
        if queue is None:
            return QuotaFacts(job.queue, job.flavor, False, QuotaLimit.NO_QUOTA, job.gpus, 0, 0, 0, None, 0, 0, job.gpus,
                              message=f"queue {job.queue} does not exist")
        check: QuotaCheck = self.ledger.check(job)
        borrowers = self._borrowers(queue, job.flavor)
        lent_out = 0
        message = "" if check.fits else check.message(job.queue)
        unused_nominal = max(0, check.nominal - check.used)
        if check.limit in (QuotaLimit.LENT_OUT, QuotaLimit.COHORT_EXHAUSTED):
            lent_out = max(0, unused_nominal - check.room)
        who = ", ".join(f"{name} borrows {gpus}" for name, gpus in borrowers[:3]) or "other queues"
        if len(borrowers) > 3:
            who += ", …"
        if check.limit == QuotaLimit.LENT_OUT:
            reclaimable = self._reclaimable_gpus(borrowers, job.flavor)
            how = ("and reclaimable by preemption" if reclaimable >= check.short_by else
                   f"but only {reclaimable} of it is reclaimable by preemption (non-preemptible jobs hold the rest)")
            message = (
                f"needs {check.requested} {job.flavor} GPUs within queue {job.queue}'s nominal quota {check.nominal} "
                f"({check.used} in use, {unused_nominal} unused); {lent_out} of it is lent out to the cohort "
                f"({who}) {how} → {check.short_by} short now"
            )
        elif check.limit == QuotaLimit.COHORT_EXHAUSTED and lent_out:
            beyond = check.used + check.requested - check.nominal
            message = (
                f"needs {check.requested} {job.flavor} GPUs, {beyond} beyond queue {job.queue}'s nominal quota "
                f"{check.nominal} ({check.used} in use), and the cohort has {check.cohort_can_lend} to lend; "
                f"{lent_out} of the queue's unused nominal is lent out ({who}), reclaimable only by a job that "
                f"fits within nominal → {check.short_by} short now"
            )
        elif check.fits:
            message = (
                f"fits quota: {check.requested} {job.flavor} GPUs of room {check.room} "
                f"(nominal {check.nominal}, {check.used} in use"
                + (f", borrowing {check.used + check.requested - check.nominal} from the cohort" if check.is_borrowing else "")
                + ")"
            )
        return QuotaFacts(
            queue=job.queue, flavor=job.flavor, fits=check.fits, limit=check.limit, requested=check.requested,
            nominal=check.nominal, used=check.used,
            borrowing_limit=check.borrowing_limit if queue.cohort is not None else None,
            cohort=queue.cohort, cohort_can_lend=check.cohort_can_lend, room=check.room, short_by=check.short_by,
            lent_out=lent_out, borrowers=borrowers, message=message,
        )

    def _reclaimable_gpus(self, borrowers: tuple[tuple[str, int], ...], flavor: str) -> int:
        """GPUs the borrowing queues hold with preemptible jobs, up to what each borrows: what reclaiming can free.
        (Non-preemptible jobs never borrow; ones admitted before that rule may still hold lent quota.)"""
        borrowed = dict(borrowers)
        preemptible: dict[str, int] = {}
        for other in self.snapshot.admitted:
            if other.queue in borrowed and other.flavor == flavor and other.is_preemptible:
                preemptible[other.queue] = preemptible.get(other.queue, 0) + other.gpus
        return sum(min(gpus, preemptible.get(name, 0)) for name, gpus in borrowed.items())

    def _borrowers(self, queue: Queue, flavor: str) -> tuple[tuple[str, int], ...]:
        if queue.cohort is None:
            return ()
        key = (cohort_of(queue), flavor)
        everyone = self._borrowers_cache.get(key)
        if everyone is None:
            found = [
                (other.name, self.ledger.borrowed(other, flavor))
                for other in self.snapshot.queues.values()
                if cohort_of(other) == key[0]
            ]
            everyone = self._borrowers_cache[key] = tuple(
                sorted(((name, gpus) for name, gpus in found if gpus > 0), key=lambda item: (-item[1], item[0]))
            )
        return tuple(item for item in everyone if item[0] != queue.name)[:MAX_NAMED]

    def fits(self, job: Job, variant: str) -> bool:
        key = (variant, job.shape)
        fits = self._place_cache.get(key)
        if fits is None:
            fits = self._place_cache[key] = self._fleet(variant).fits(job)
        return fits

    def _fleet(self, variant: str) -> FleetState:
        """"actual"; "health": every device healthy; "all": every node of the fleet usable and healthy."""
        if variant == "actual":
            return self.fleet
        fleet = self._relaxed.get(variant)
        if fleet is None:
            nodes = tuple(_relaxed_node(n, conditions=variant == "all") for n in self.fleet.nodes)
            if nodes == self.fleet.nodes:
                fleet = self.fleet
            else:
                fleet = FleetState(nodes, self.fleet.topology, topology_aware=self.fleet.topology_aware,
                                   single_pods_fleet_wide=self.fleet.single_pods_fleet_wide,
                                   single_pods_beside_long_runners=self.fleet.single_pods_beside_long_runners)
                for holder in self.holding.values():
                    fleet.allocate_placement(holder.placement, holder)
            self._relaxed[variant] = fleet
        return fleet

    def fit(self, job: Job) -> FitFacts:
        facts = self._fit_cache.get(job.shape)
        if facts is None:
            facts = self._fit_cache[job.shape] = self._fit_facts(job)
        return facts

    def _fit_facts(self, job: Job) -> FitFacts:
        fleet = self.fleet
        free = free_capacity(job, fleet)
        report = self._fragmentation(job.flavor)
        finest = self.snapshot.topology[-1] if self.snapshot.topology else FLEET
        racks = sorted(
            ((d.key, d.scattered_gpus) for d in report.domains if d.level == finest and d.scattered_gpus > 0),
            key=lambda item: (-item[1], item[0]),
        )[:MAX_NAMED]
        fits_relaxed = self.fits(job, "all")
        fits_now = self.fits(job, "actual")
        is_fragmented = not fits_now and free.free_gpus >= job.gpus
        largest = None
        level = job.topology.required
        if level and level in fleet.domains:
            classes = fleet.tolerated_classes(job)
            best = None
            for domain in fleet.domains[level]:
                domain_free = fleet.free_gpus_in(domain, classes)
                if best is None or domain_free > best.free_gpus:
                    wholes = sum(1 for i in domain.node_indices if fleet.is_eligible(i, classes) and fleet.is_whole_free(i))
                    best = DomainFacts(level, domain.key, domain_free, wholes)
            largest = best
        message = fit_message(job, free, is_fragmented=is_fragmented, racks=racks,
                              largest_domain=None if largest is None else (largest.key, largest.free_gpus, largest.whole_free_nodes))
        return FitFacts(
            fits=fits_relaxed, needed_gpus=job.gpus, free_gpus=free.free_gpus, node_gpus=free.node_gpus,
            whole_nodes_needed=free.whole_nodes_needed(job), whole_free_nodes=free.whole_free_nodes, required_level=level,
            largest_domain=largest,
            fragmentation=FragmentationFacts(is_fragmented, free.scattered_gpus, free.partly_used_nodes, tuple(racks)),
            message=message,
        )

    def _fragmentation(self, flavor: str):
        report = self._fragmentation_cache.get(flavor)
        if report is None:
            report = self._fragmentation_cache[flavor] = measure(self.fleet, flavor)
        return report

    def nodes(self, job: Job) -> NodeFacts:
        pod_gpus = max(ps.gpus_per_pod for ps in job.pod_sets)
        key = (job.flavor, job.tolerations, pod_gpus)
        facts = self._nodes_cache.get(key)
        if facts is None:
            facts = self._nodes_cache[key] = self._node_facts(job, pod_gpus)
        return facts

    def _node_facts(self, job: Job, pod_gpus: int) -> NodeFacts:
        fleet = self.fleet
        counts: dict[str, int] = {}
        eligible = 0
        for i, node in enumerate(fleet.nodes):
            reason = _node_reason(node, fleet.free[i], job, pod_gpus)
            if reason is None:
                eligible += 1
            else:
                counts[reason] = counts.get(reason, 0) + 1
        order = (NodeReason.INSUFFICIENT_GPUS, NodeReason.UNHEALTHY, NodeReason.CORDONED, NodeReason.NOT_READY,
                 NodeReason.UNTOLERATED_TAINT, NodeReason.WRONG_FLAVOR)
        reasons = tuple((r, counts[r]) for r in order if counts.get(r))
        phrases = {
            NodeReason.INSUFFICIENT_GPUS: f"have fewer than {pod_gpus} free GPUs",
            NodeReason.UNHEALTHY: "have unhealthy devices",
            NodeReason.CORDONED: "cordoned",
            NodeReason.NOT_READY: "not ready",
            NodeReason.UNTOLERATED_TAINT: "untolerated taint",
            NodeReason.WRONG_FLAVOR: "wrong flavor",
        }
        detail = ", ".join(f"{n} {phrases[r]}" for r, n in reasons)
        message = f"{eligible}/{len(fleet.nodes)} nodes are available for a {pod_gpus}-GPU pod" + (f": {detail}" if detail else "")
        return NodeFacts(len(fleet.nodes), eligible, pod_gpus, reasons, message)

    def health(self, flavor: str) -> HealthFacts:
        facts = self._health_cache.get(flavor)
        if facts is None:
            broken = []
            for node in self.fleet.nodes:
                if node.flavor != flavor or not node.is_unhealthy:
                    continue
                if node.allocatable_gpus == 0 and node.is_ready:
                    problem = "Ready with 0 allocatable GPUs: the device plugin reports none"
                else:
                    problem = f"{node.capacity_gpus - node.allocatable_gpus} of {node.capacity_gpus} GPUs unhealthy"
                broken.append(BrokenNode(node.name, node.capacity_gpus, node.allocatable_gpus, problem))
            missing = sum(b.capacity - b.allocatable for b in broken)
            names = ", ".join(b.name for b in broken[:MAX_NAMED]) + (" …" if len(broken) > MAX_NAMED else "")
            message = (f"{len(broken)} {flavor} nodes miss {missing} GPUs: {names}" if broken
                       else f"every {flavor} node reports all its GPUs")
            facts = self._health_cache[flavor] = HealthFacts(tuple(broken[: MAX_NAMED * 5]), len(broken), missing, message)
        return facts

    def never_fits(self, job: Job, queue: Queue) -> bool:
        if self._empty_fleet is None:
            # Empty, and every node usable: what the fleet could give once running jobs end and nodes recover.
            nodes = tuple(_relaxed_node(n, conditions=True) for n in self.fleet.nodes)
            self._empty_fleet = EmptyFleet(nodes, self.fleet.topology, topology_aware=self.fleet.topology_aware)
        pool = self.ledger.pool_size.get((cohort_of(queue), job.flavor), 0)
        return bool(why_never_admitted(job, queue, pool=pool, empty_fleet=self._empty_fleet))

    def jobs_on(self, names: Iterable[str]) -> list[Job]:
        by_node = self.node_jobs()
        seen: dict[int, Job] = {}
        for name in names:
            i = self.fleet.index_of.get(name)
            if i is not None:
                for job in by_node[i]:
                    seen[job.id] = job
        return list(seen.values())

    def node_jobs(self) -> list[list[Job]]:
        if self._jobs_on_node is None:
            self._jobs_on_node = jobs_on_nodes(self.holding.values(), self.fleet)
        return self._jobs_on_node


def _node_reason(node: Node, free: int, job: Job, pod_gpus: int) -> str | None:
    if node.flavor != job.flavor:
        return NodeReason.WRONG_FLAVOR
    if not node.is_ready:
        return NodeReason.NOT_READY
    if node.is_cordoned:
        return NodeReason.CORDONED
    if node.taints and not all(any(t.tolerates(taint) for t in job.tolerations) for taint in node.taints):
        return NodeReason.UNTOLERATED_TAINT
    if free < pod_gpus:
        if node.allocatable_gpus < node.capacity_gpus and free + node.capacity_gpus - node.allocatable_gpus >= pod_gpus:
            return NodeReason.UNHEALTHY
        return NodeReason.INSUFFICIENT_GPUS
    return None


def _relaxed_node(node: Node, *, conditions: bool) -> Node:
    healthy = node.allocatable_gpus >= node.capacity_gpus
    if healthy and not (conditions and (node.taints or node.is_cordoned or not node.is_ready)):
        return node
    changes: dict = {"allocatable_gpus": max(node.capacity_gpus, node.allocatable_gpus)}
    if conditions:
        changes.update(taints=(), is_cordoned=False, is_ready=True)
    return replace(node, **changes)
