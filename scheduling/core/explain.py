"""Why a job is pending, as an ordered isolation (quota → fit → nodes → health), and the fixes ranked by displacement.

Each level asks one question of the state a pending job faces after the cycle:

1. **quota** — does the queue have room? (`QuotaLedger.check`: which limit, with the numbers)
2. **fit** — would the gang fit if every node of its flavor were usable (ready, uncordoned,
   tolerated, healthy)? If not, capacity itself is short: free GPUs, whole nodes, the largest
   free capacity in one required domain, and fragmentation (free GPUs scattered on partly used
   nodes, and the racks holding them).
3. **nodes** — would it fit with the real node conditions (cordoned, not ready, untolerated
   taint) but healthy devices? If not, per-node reasons block: counts over all nodes, like the
   Kubernetes scheduler's "0/1250 nodes are available: …".
4. **health** — does it fit with the real allocatable GPUs? If not, nodes with devices missing
   (allocatable below capacity, or Ready with none) block: they are named.

`blocking` is the first level that blocks; the facts of every level are given anyway. A job that
passes all four waits for its turn (`order`: strict FIFO, a starving job's reservation, backoff) or starts on
the next pass (None).

Fixes are ranked by displacement — GPU-hours other tenants lose, then teams affected: wait (cost 0),
borrow (a changed borrowing limit), uncordon / tolerate / repair the nodes, defragment (requeue small
checkpointable jobs to free whole nodes), preempt (the core's own plan on the same state).

Explanations are computed once per distinct shape per pass (flavor, pod sets, topology,
tolerations, queue, priority, and the cycle's verdict); jobs of one shape share one object.
"""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass, field, replace
from typing import Iterable

from scheduling.core.attained import service_level
from scheduling.core.fairshare import sort_queue
from scheduling.core.fragmentation import measure
from scheduling.core.model import (
    FLEET,
    CycleResult,
    Job,
    JobState,
    Node,
    Pending,
    PendingReason,
    PlannedPreemption,
    PreemptionPlan,
    Queue,
    Snapshot,
)
from scheduling.core.placement import FleetState
from scheduling.core.preemption import candidate_victims, displacement_cost_gpu_hours, needs_approval, plan_preemption
from scheduling.core.quota import QuotaCheck, QuotaLedger, QuotaLimit, cohort_of, lendable
from scheduling.core.reach import EmptyFleet, why_never_admitted

MAX_NAMED = 10
"""Nodes, racks, jobs named in one list; the counts carry the rest."""
MAX_DEFRAG_DOMAINS = 8
MAX_PREEMPTION_PLANS = 4
"""Preemption plans per explanation pass: the expensive fix (~0.1 s each at 1,250 nodes). Queue heads are
explained first, so the plans go to the jobs that may preempt next; other shapes list no preempt fix."""
MAX_RESHAPES = 16
"""Explanations per pass that also try a changed request (a smaller gang, no topology requirement, another flavor):
a few placements each, spent on the queue heads explained first."""


class Level:
    QUOTA = PendingReason.QUOTA.value
    FIT = PendingReason.FIT.value
    NODES = PendingReason.NODES.value
    HEALTH = PendingReason.HEALTH.value
    ORDER = PendingReason.ORDER.value
    PRIORITY_CLASS = PendingReason.PRIORITY_CLASS.value


class NodeReason:
    """Why one node cannot take one of the gang's largest pods: the first that applies, in this order."""

    WRONG_FLAVOR = "wrong_flavor"
    NOT_READY = "not_ready"
    CORDONED = "cordoned"
    UNTOLERATED_TAINT = "untolerated_taint"
    UNHEALTHY = "unhealthy_devices"
    INSUFFICIENT_GPUS = "insufficient_gpus"


class Action:
    WAIT = "wait"
    BORROW = "borrow"
    RAISE_QUOTA = "raise_quota"
    UNCORDON = "uncordon"
    TOLERATE = "tolerate"
    DRAIN_NODE = "drain_node"
    DEFRAGMENT = "defragment"
    PREEMPT = "preempt"
    LOWER_CLASS = "lower_class"
    SHRINK = "shrink"
    RELAX_TOPOLOGY = "relax_topology"
    OTHER_FLAVOR = "other_flavor"


# --- the facts of each level ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaFacts:
    queue: str
    flavor: str
    fits: bool
    limit: str
    """A QuotaLimit value, or "" when the job fits its quota."""
    requested: int
    nominal: int
    used: int
    borrowing_limit: int | None
    cohort: str | None
    cohort_can_lend: int
    room: int
    short_by: int
    lent_out: int = 0
    """GPUs of the queue's unused nominal quota that other queues of the cohort hold (reclaimable)."""
    borrowers: tuple[tuple[str, int], ...] = ()
    """Queues of the cohort using more than their nominal quota, with the GPUs they borrow."""
    message: str = ""


@dataclass(frozen=True, slots=True)
class DomainFacts:
    level: str
    key: str
    free_gpus: int
    whole_free_nodes: int


@dataclass(frozen=True, slots=True)
class FragmentationFacts:
    is_fragmented: bool
    scattered_gpus: int
    partly_used_nodes: int
    racks: tuple[tuple[str, int], ...]
    """The finest domains holding the most scattered GPUs (key, GPUs), most first."""


@dataclass(frozen=True, slots=True)
class FitFacts:
    fits: bool
    """Would the gang fit if every node of its flavor were ready, uncordoned, tolerated and healthy?"""
    needed_gpus: int
    free_gpus: int
    """Free GPUs of the flavor on the nodes the job may use."""
    node_gpus: int
    whole_nodes_needed: int
    whole_free_nodes: int
    required_level: str | None
    largest_domain: DomainFacts | None
    fragmentation: FragmentationFacts
    message: str


@dataclass(frozen=True, slots=True)
class NodeFacts:
    total: int
    eligible: int
    """Nodes that could take one of the gang's largest pods now."""
    pod_gpus: int
    reasons: tuple[tuple[str, int], ...]
    message: str


@dataclass(frozen=True, slots=True)
class BrokenNode:
    name: str
    capacity: int
    allocatable: int
    problem: str


@dataclass(frozen=True, slots=True)
class HealthFacts:
    nodes: tuple[BrokenNode, ...]
    count: int
    missing_gpus: int
    message: str


@dataclass(frozen=True, slots=True)
class Fix:
    action: str
    cost_gpu_hours: float
    teams_affected: tuple[str, ...]
    needs_approval: bool
    detail: str
    jobs: tuple[int, ...] = ()
    """Jobs the fix stops (victims, jobs moved to defragment)."""
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "cost_gpu_hours": round(self.cost_gpu_hours, 3),
            "teams_affected": list(self.teams_affected),
            "needs_approval": self.needs_approval,
            "detail": self.detail,
            "jobs": list(self.jobs),
            "nodes": list(self.nodes),
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    blocking: str | None
    summary: str
    quota: QuotaFacts
    fit: FitFacts | None
    nodes: NodeFacts | None
    health: HealthFacts | None
    fixes: tuple[Fix, ...]
    order: str = ""
    """Why a job that would fit waits (strict FIFO, backoff), empty otherwise."""
    never_fits: bool = False
    """Waiting alone will never start it (more than the quota or the fleet can ever give)."""
    headline: str = ""
    """The first sentence a researcher reads: the conclusion in plain words, before the facts with their numbers."""
    attained_service: str = ""
    """For a job that ran before (core.attained): how much, and how many jobs of its queue go first for having run less."""

    def to_dict(self) -> dict:
        return {
            "blocking": self.blocking,
            "headline": self.headline,
            "summary": self.summary,
            "quota": _quota_dict(self.quota),
            "fit": _fit_dict(self.fit) if self.fit else None,
            "nodes": _nodes_dict(self.nodes) if self.nodes else None,
            "health": _health_dict(self.health) if self.health else None,
            "order": self.order,
            "attained_service": self.attained_service,
            "never_fits": self.never_fits,
            "position": None,
            "fixes": [fix.to_dict() for fix in self.fixes],
        }


def iso(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return dt.datetime.fromtimestamp(epoch_s, tz=dt.timezone.utc).isoformat(timespec="seconds")


def _quota_dict(q: QuotaFacts) -> dict:
    return {
        "queue": q.queue, "flavor": q.flavor, "fits": q.fits, "limit": q.limit or None, "requested": q.requested,
        "nominal": q.nominal, "in_use": q.used, "borrowing_limit": q.borrowing_limit, "cohort": q.cohort,
        "borrowable_from_cohort": q.cohort_can_lend, "room": q.room, "short_by": q.short_by, "lent_out": q.lent_out,
        "borrowers": [{"queue": name, "gpus": gpus} for name, gpus in q.borrowers], "message": q.message,
    }


def _fit_dict(f: FitFacts) -> dict:
    largest = f.largest_domain
    return {
        "fits": f.fits, "needed_gpus": f.needed_gpus, "free_gpus": f.free_gpus, "node_gpus": f.node_gpus,
        "whole_nodes_needed": f.whole_nodes_needed, "whole_free_nodes": f.whole_free_nodes,
        "required_level": f.required_level,
        "largest_domain": None if largest is None else {
            "level": largest.level, "key": largest.key, "free_gpus": largest.free_gpus, "whole_free_nodes": largest.whole_free_nodes},
        "fragmentation": {
            "is_fragmented": f.fragmentation.is_fragmented,
            "scattered_gpus": f.fragmentation.scattered_gpus,
            "partly_used_nodes": f.fragmentation.partly_used_nodes,
            "racks": [{"rack": key, "gpus": gpus} for key, gpus in f.fragmentation.racks],
        },
        "message": f.message,
    }


def _nodes_dict(n: NodeFacts) -> dict:
    return {"total": n.total, "eligible": n.eligible, "pod_gpus": n.pod_gpus, "reasons": dict(n.reasons), "message": n.message}


def _health_dict(h: HealthFacts) -> dict:
    return {
        "nodes": [{"name": b.name, "capacity": b.capacity, "allocatable": b.allocatable, "problem": b.problem} for b in h.nodes],
        "count": h.count, "missing_gpus": h.missing_gpus, "message": h.message,
    }


# --- the state pending jobs face after a cycle ------------------------------------------------------


def holding_after(snapshot: Snapshot, result: CycleResult) -> dict[int, Job]:
    """Jobs holding GPUs once the cycle's decisions apply: minus evicted and preempted, plus admitted."""
    gone = {e.job_id for e in result.evictions}
    gone.update(v for a in result.admissions for v in a.preempted)
    holding = {job.id: job for job in snapshot.admitted if job.id not in gone}
    if result.admissions:
        pending = {job.id: job for job in snapshot.pending}
        for admission in result.admissions:
            job = pending.get(admission.job_id)
            if job is not None:
                holding[job.id] = replace(
                    job, state=JobState.ADMITTED, placement=admission.placement, admitted_at=snapshot.now, started_at=None
                )
    return holding


# --- the explainer ----------------------------------------------------------------------------------


class Explainer:
    """Explanations for the pending jobs of one snapshot, against one fleet state and ledger, cached per shape."""

    def __init__(
        self,
        snapshot: Snapshot,
        fleet: FleetState,
        ledger: QuotaLedger,
        holding: Iterable[Job],
        *,
        protected: Iterable[int] = (),
        plans: Iterable[PlannedPreemption] = (),
        max_preemption_plans: int = MAX_PREEMPTION_PLANS,
    ) -> None:
        self.snapshot = snapshot
        self.config = snapshot.config
        self.fleet = fleet
        self.ledger = ledger
        self.holding = {job.id: job for job in holding}
        self.protected = set(protected)
        self.plans = {p.plan.job_id: p for p in plans}
        self.preemption_budget = max_preemption_plans
        self.reshape_budget = MAX_RESHAPES
        self._relaxed: dict[str, FleetState] = {}
        self._empty_fleet: EmptyFleet | None = None
        self._jobs_on_node: list[list[Job]] | None = None
        self._cache: dict[tuple, Explanation] = {}
        self._quota_cache: dict[tuple, QuotaFacts] = {}
        self._borrowers_cache: dict[tuple, tuple] = {}
        self._place_cache: dict[tuple, bool] = {}
        self._fit_cache: dict[tuple, FitFacts] = {}
        self._nodes_cache: dict[tuple, NodeFacts] = {}
        self._health_cache: dict[str, HealthFacts] = {}
        self._fragmentation_cache: dict[str, object] = {}
        self._defrag_cache: dict[tuple, Fix | None] = {}
        self._preempt_cache: dict[tuple, Fix | None] = {}

    @classmethod
    def after_cycle(cls, snapshot: Snapshot, result: CycleResult, **options) -> Explainer:
        holding = holding_after(snapshot, result)
        fleet = FleetState(snapshot.nodes, snapshot.topology, topology_aware=snapshot.config.topology_aware)
        for job in holding.values():
            fleet.allocate_placement(job.placement, job)
        ledger = QuotaLedger(snapshot.queues, holding.values())
        return cls(
            snapshot, fleet, ledger, holding.values(),
            protected={a.job_id for a in result.admissions}, plans=result.preemptions, **options,
        )

    # -- one job ----------------------------------------------------------------------------------

    def explain(self, job: Job, verdict: Pending | None = None) -> Explanation:
        key = self.key(job, verdict)
        explanation = self._cache.get(key)
        if explanation is None:
            explanation = self._cache[key] = self._explain(job, verdict)
        return explanation

    @staticmethod
    def key(job: Job, verdict: Pending | None) -> tuple:
        """Jobs of one key share an explanation: the shape, the queue, the priority, and a verdict that names the job."""
        base = (job.queue, job.flavor, job.pod_sets, job.topology, job.tolerations, job.priority)
        kind = verdict.reason if verdict is not None else None
        if kind is PendingReason.AWAITING_APPROVAL:
            return (*base, kind, job.id)
        if kind is PendingReason.ORDER or kind is PendingReason.BACKOFF or kind is PendingReason.PRIORITY_CLASS:
            return (*base, kind, verdict.message)
        return base

    def _explain(self, job: Job, verdict: Pending | None) -> Explanation:
        queue = self.snapshot.queues.get(job.queue)
        quota = self._quota(job, queue)
        if queue is None:
            return Explanation(Level.QUOTA, quota.message, quota, None, None, None, (), never_fits=True)
        fit = self._fit(job)
        nodes = self._nodes(job)
        health = self._health(job.flavor)
        fits_healthy = self._fits(job, "health")
        fits_now = self._fits(job, "actual")
        if not quota.fits:
            blocking = Level.QUOTA
        elif not fit.fits:
            blocking = Level.FIT
        elif not fits_healthy:
            blocking = Level.NODES
        elif not fits_now:
            blocking = Level.HEALTH
        else:
            blocking = None
        order = ""
        if verdict is not None and verdict.reason in (PendingReason.ORDER, PendingReason.BACKOFF):
            order = verdict.message
            if blocking is None:
                blocking = Level.ORDER
        class_cap = verdict.message if verdict is not None and verdict.reason is PendingReason.PRIORITY_CLASS else ""
        if class_cap:  # the cycle checks the class's cap before quota and placement
            blocking = Level.PRIORITY_CLASS
        never = self._never_fits(job, queue)
        fixes = self._fixes(job, queue, blocking, quota, fit, nodes, health, never, verdict)
        summary = class_cap or self._summary(job, blocking, quota, fit, nodes, health, order, never)
        headline = self._headline(job, queue, blocking, quota, fit, nodes, health, order, never, fixes)
        return Explanation(blocking, summary, quota, fit, nodes, health, fixes, order=order, never_fits=never, headline=headline)

    # -- 1 quota ----------------------------------------------------------------------------------

    def _quota(self, job: Job, queue: Queue | None) -> QuotaFacts:
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

    # -- 2 fit ------------------------------------------------------------------------------------

    def _fits(self, job: Job, variant: str) -> bool:
        key = (variant, job.shape)
        fits = self._place_cache.get(key)
        if fits is None:
            fits = self._place_cache[key] = self._fleet(variant).place(job) is not None
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
                fleet = FleetState(nodes, self.fleet.topology, topology_aware=self.fleet.topology_aware)
                for holder in self.holding.values():
                    fleet.allocate_placement(holder.placement, holder)
            self._relaxed[variant] = fleet
        return fleet

    def _fit(self, job: Job) -> FitFacts:
        facts = self._fit_cache.get(job.shape)
        if facts is None:
            facts = self._fit_cache[job.shape] = self._fit_facts(job)
        return facts

    def _fit_facts(self, job: Job) -> FitFacts:
        fleet = self.fleet
        classes = fleet.tolerated_classes(job)
        eligible = [i for i in range(len(fleet.nodes)) if fleet.is_eligible(i, classes)]
        free_gpus = sum(max(0, fleet.free[i]) for i in eligible)
        whole = sum(1 for i in eligible if fleet.is_whole_free(i))
        node_gpus = max((fleet.nodes[i].allocatable_gpus for i in eligible), default=0) or max(
            (n.capacity_gpus for n in fleet.nodes if n.flavor == job.flavor), default=0
        )
        whole_needed = sum(ps.count for ps in job.pod_sets if node_gpus and ps.gpus_per_pod >= node_gpus)
        report = self._fragmentation(job.flavor)
        finest = self.snapshot.topology[-1] if self.snapshot.topology else FLEET
        racks = sorted(
            ((d.key, d.scattered_gpus) for d in report.domains if d.level == finest and d.scattered_gpus > 0),
            key=lambda item: (-item[1], item[0]),
        )[:MAX_NAMED]
        scattered = free_gpus - sum(fleet.free[i] for i in eligible if fleet.is_whole_free(i))
        partly = sum(1 for i in eligible if 0 < fleet.free[i] and not fleet.is_whole_free(i))
        fits_relaxed = self._fits(job, "all")
        fits_now = self._fits(job, "actual")
        is_fragmented = not fits_now and free_gpus >= job.gpus
        largest = None
        level = job.topology.required
        if level and level in fleet.domains:
            best = None
            for domain in fleet.domains[level]:
                free = fleet.free_gpus_in(domain, classes)
                if best is None or free > best.free_gpus:
                    wholes = sum(1 for i in domain.node_indices if fleet.is_eligible(i, classes) and fleet.is_whole_free(i))
                    best = DomainFacts(level, domain.key, free, wholes)
            largest = best
        fragmentation = FragmentationFacts(is_fragmented, scattered, partly, tuple(racks))
        where = f" inside one {level}" if level else ""
        parts = [f"needs {job.gpus} {job.flavor} GPUs{where}"]
        if whole_needed:
            parts.append(f"{whole_needed} whole nodes")
        message = f"{' in '.join(parts)}; {free_gpus} free on {len(eligible)} usable nodes, {whole} whole nodes free"
        if largest is not None:
            message += f"; the largest {level} ({largest.key}) has {largest.free_gpus} free, {largest.whole_free_nodes} whole nodes"
        if is_fragmented:
            where_racks = ", ".join(f"{key} {gpus}" for key, gpus in racks[:5])
            message += (
                f" — fragmentation: {scattered} GPUs scattered over {partly} partly used nodes"
                + (f" ({where_racks})" if where_racks else "")
            )
        return FitFacts(
            fits=fits_relaxed, needed_gpus=job.gpus, free_gpus=free_gpus, node_gpus=node_gpus,
            whole_nodes_needed=whole_needed, whole_free_nodes=whole, required_level=level,
            largest_domain=largest, fragmentation=fragmentation, message=message,
        )

    def _fragmentation(self, flavor: str):
        report = self._fragmentation_cache.get(flavor)
        if report is None:
            report = self._fragmentation_cache[flavor] = measure(self.fleet, flavor)
        return report

    # -- 3 nodes ----------------------------------------------------------------------------------

    def _nodes(self, job: Job) -> NodeFacts:
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

    # -- 4 health ---------------------------------------------------------------------------------

    def _health(self, flavor: str) -> HealthFacts:
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

    # -- never ------------------------------------------------------------------------------------

    def _never_fits(self, job: Job, queue: Queue) -> bool:
        if self._empty_fleet is None:
            # Empty, and every node usable: what the fleet could give once running jobs end and nodes recover.
            nodes = tuple(_relaxed_node(n, conditions=True) for n in self.fleet.nodes)
            self._empty_fleet = EmptyFleet(nodes, self.fleet.topology, topology_aware=self.fleet.topology_aware)
        pool = self.ledger.pool_size.get((cohort_of(queue), job.flavor), 0)
        return bool(why_never_admitted(job, queue, pool=pool, empty_fleet=self._empty_fleet))

    # -- fixes ------------------------------------------------------------------------------------

    def _fixes(self, job, queue, blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts, health: HealthFacts,
               never: bool, verdict: Pending | None) -> tuple[Fix, ...]:
        fixes: list[Fix] = []
        if blocking is None:
            return ()
        if not never:
            fixes.append(Fix(Action.WAIT, 0.0, (), False,
                             "wait: running jobs end at their runtime limits and the queue moves (see the estimated start)"))
        if blocking == Level.PRIORITY_CLASS:
            fixes.append(Fix(Action.LOWER_CLASS, 0.0, (), False,
                             f"resubmit at a lower priority class: {job.priority_class}'s cap does not apply there"))
        if not quota.fits:
            fixes.extend(self._quota_fixes(job, queue, quota))
        if blocking in (Level.NODES, Level.HEALTH) or (blocking == Level.FIT and health.count):
            fixes.extend(self._node_fixes(job, nodes, health))
        if blocking == Level.FIT and fit.fragmentation.is_fragmented:
            defrag = self._defragment(job)
            if defrag is not None:
                fixes.append(defrag)
        if blocking in (Level.QUOTA, Level.FIT, Level.NODES, Level.HEALTH):
            preempt = self._preempt(job, queue, blocking, verdict)
            if preempt is not None:
                fixes.append(preempt)
            fixes.extend(self._reshape_fixes(job, queue, blocking))
        ranked = sorted(enumerate(fixes), key=lambda item: (item[1].cost_gpu_hours, len(item[1].teams_affected), item[0]))
        return tuple(fix for _, fix in ranked)

    def _quota_fixes(self, job: Job, queue: Queue, quota: QuotaFacts) -> list[Fix]:
        fixes = []
        flavor_quota = queue.quotas.get(job.flavor)
        if quota.limit == QuotaLimit.BORROWING_LIMIT and flavor_quota is not None:
            after = quota.used + job.gpus
            pool_free = self.ledger.pool_free(cohort_of(queue), job.flavor)
            draw_now = max(0, quota.used - (flavor_quota.nominal - lendable(flavor_quota)))
            draw_after = max(0, after - (flavor_quota.nominal - lendable(flavor_quota)))
            if draw_after - draw_now <= pool_free:
                new_limit = after - flavor_quota.nominal
                lenders = tuple(sorted({self.snapshot.queues[name].team for name in self._lenders(queue, job.flavor)}))
                fixes.append(Fix(
                    Action.BORROW, 0.0, lenders, False,
                    f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} borrowing limit from "
                    f"{flavor_quota.borrowing_limit} to {new_limit}: the cohort {queue.cohort} can lend it now "
                    f"(idle quota of {', '.join(lenders) or 'the cohort'}, reclaimable by its owners)",
                ))
        elif quota.limit == QuotaLimit.NOT_PREEMPTIBLE:
            fixes.append(Fix(
                Action.RAISE_QUOTA, 0.0, (), False,
                f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} nominal quota by at least "
                f"{max(quota.short_by, 1)} (within the team's allotment); or resubmit the job preemptible, so it may borrow",
            ))
        elif quota.limit in (QuotaLimit.NOMINAL, QuotaLimit.NO_QUOTA):
            fixes.append(Fix(
                Action.RAISE_QUOTA, 0.0, (), False,
                f"a lead of team {queue.team} raises queue {queue.name}'s {job.flavor} nominal quota by at least "
                f"{max(quota.short_by, 1)} (within the team's allotment), or joins a cohort to borrow",
            ))
        return fixes

    def _reshape_fixes(self, job: Job, queue: Queue, blocking: str) -> list[Fix]:
        """Changes to the request that start it now, paid for by the job alone: fewer pods, no topology
        requirement, another flavor. Each must pass the quota check and place on the real fleet."""
        if self.reshape_budget <= 0:
            return []
        self.reshape_budget -= 1
        fixes = []
        if job.topology.required and blocking == Level.FIT:
            relaxed = replace(job, topology=type(job.topology)(None, job.topology.preferred or job.topology.required))
            if self._starts_now(relaxed):
                fixes.append(Fix(
                    Action.RELAX_TOPOLOGY, 0.0, (), False,
                    f"drop the requirement that all pods share one {job.topology.required} (keep it as a preference): the "
                    f"gang fits across {job.topology.required}s now; the job pays with slower links between some ranks",
                ))
        smaller = self._largest_gang_now(job)
        if smaller is not None:
            pod_set = smaller.pod_sets[-1]
            fixes.append(Fix(
                Action.SHRINK, 0.0, (), False,
                f"shrink {pod_set.name} to {pod_set.count} pods ({smaller.gpus} GPUs, {job.gpus - smaller.gpus} fewer): that "
                f"gang fits quota and placement now; the job pays with fewer ranks and a longer run",
            ))
        for flavor in sorted({n.flavor for n in self.fleet.nodes} - {job.flavor}):
            other = replace(job, flavor=flavor)
            if other.flavor in (self.snapshot.queues[job.queue].quotas if job.queue in self.snapshot.queues else {}) and self._starts_now(other):
                fixes.append(Fix(
                    Action.OTHER_FLAVOR, 0.0, (), False,
                    f"resubmit on {flavor}: queue {queue.name} has quota and the fleet has room for the whole gang there now",
                ))
        return fixes

    def _starts_now(self, job: Job) -> bool:
        return self.ledger.check(job).fits and self._fits(job, "actual")

    def _largest_gang_now(self, job: Job) -> Job | None:
        """The job with its last pod set cut to the most pods that start now (a bisection), if at least one does."""
        last = job.pod_sets[-1]
        low, high, best = 1, last.count - 1, None
        while low <= high:
            count = (low + high) // 2
            candidate = replace(job, pod_sets=(*job.pod_sets[:-1], last._replace(count=count)))
            if self._starts_now(candidate):
                best, low = candidate, count + 1
            else:
                high = count - 1
        return best

    def _lenders(self, queue: Queue, flavor: str) -> list[str]:
        cohort = cohort_of(queue)
        names = []
        for other in self.snapshot.queues.values():
            if other.name == queue.name or cohort_of(other) != cohort:
                continue
            quota = other.quotas.get(flavor)
            if quota is not None and self.ledger.usage(other.name, flavor) < quota.nominal and lendable(quota) > 0:
                names.append(other.name)
        return names

    def _node_fixes(self, job: Job, nodes: NodeFacts, health: HealthFacts) -> list[Fix]:
        fixes = []
        reasons = dict(nodes.reasons)
        if reasons.get(NodeReason.CORDONED) or reasons.get(NodeReason.NOT_READY):
            names = tuple(
                n.name for n in self.fleet.nodes
                if n.flavor == job.flavor and (n.is_cordoned or not n.is_ready)
            )
            fixes.append(Fix(
                Action.UNCORDON, 0.0, (), True,
                f"an admin uncordons or brings back {len(names)} {job.flavor} nodes "
                f"({reasons.get(NodeReason.CORDONED, 0)} cordoned, {reasons.get(NodeReason.NOT_READY, 0)} not ready)",
                nodes=names[:MAX_NAMED],
            ))
        if reasons.get(NodeReason.UNTOLERATED_TAINT):
            taints = sorted({f"{t.key}={t.value}:{t.effect}" for n in self.fleet.nodes if n.flavor == job.flavor
                             for t in n.taints if not any(tol.tolerates(t) for tol in job.tolerations)})
            fixes.append(Fix(
                Action.TOLERATE, 0.0, (), False,
                f"resubmit with a toleration for {', '.join(taints[:3])} "
                f"({reasons[NodeReason.UNTOLERATED_TAINT]} nodes carry it), if the job may run there",
            ))
        if health.count:
            on_broken = self._jobs_on(n.name for n in health.nodes)
            cost = sum(displacement_cost_gpu_hours(j, self.snapshot.now, self.config.restart_overhead_s) for j in on_broken)
            teams = tuple(sorted({j.team for j in on_broken}))
            fixes.append(Fix(
                Action.DRAIN_NODE, cost, teams, True,
                f"an admin drains and repairs {health.count} node(s) missing {health.missing_gpus} GPUs "
                f"({', '.join(b.name for b in health.nodes[:5])}); "
                + (f"{len(on_broken)} job(s) running there are requeued" if on_broken else "nothing runs there"),
                jobs=tuple(sorted(j.id for j in on_broken))[:MAX_NAMED],
                nodes=tuple(b.name for b in health.nodes[:MAX_NAMED]),
            ))
        return fixes

    def _jobs_on(self, names: Iterable[str]) -> list[Job]:
        by_node = self._node_jobs()
        seen: dict[int, Job] = {}
        for name in names:
            i = self.fleet.index_of.get(name)
            if i is not None:
                for job in by_node[i]:
                    seen[job.id] = job
        return list(seen.values())

    def _node_jobs(self) -> list[list[Job]]:
        if self._jobs_on_node is None:
            by_node: list[list[Job]] = [[] for _ in self.fleet.nodes]
            for job in self.holding.values():
                for i in {self.fleet.index_of[p.node] for p in job.placement if p.node in self.fleet.index_of}:
                    by_node[i].append(job)
            self._jobs_on_node = by_node
        return self._jobs_on_node

    def _defragment(self, job: Job) -> Fix | None:
        key = (job.shape, job.team)
        if key not in self._defrag_cache:
            self._defrag_cache[key] = self._defragment_plan(job)
        return self._defrag_cache[key]

    def _defragment_plan(self, job: Job) -> Fix | None:
        """Requeue small checkpointable jobs off the cheapest partly used nodes until the gang fits one domain."""
        fleet = self.fleet
        classes = fleet.tolerated_classes(job)
        by_node = self._node_jobs()
        now, overhead = self.snapshot.now, self.config.restart_overhead_s
        level = job.topology.required or FLEET
        domains = sorted(
            (d for d in fleet.domains.get(level, ()) if fleet.free_gpus_in(d, classes) >= job.gpus),
            key=lambda d: (-fleet.free_gpus_in(d, classes), d.key),
        )[:MAX_DEFRAG_DOMAINS]
        best = None
        for domain in domains:
            plan = self._defragment_domain(job, domain, classes, by_node, now, overhead)
            if plan is not None and (best is None or (plan[0], len(plan[1])) < (best[0], len(best[1]))):
                best = plan
        if best is None:
            return None
        cost, moved, nodes = best
        teams = tuple(sorted({j.team for j in moved}))
        approval = (any(t != job.team for t in teams) and self.config.cross_team_needs_approval) or (
            cost > self.config.approval_threshold_gpu_hours)
        return Fix(
            Action.DEFRAGMENT, cost, teams, approval,
            f"requeue {len(moved)} small checkpointable job(s) ({', '.join(f'#{j.id}' for j in moved[:5])}"
            f"{' …' if len(moved) > 5 else ''}) to free {len(nodes)} whole node(s) ({', '.join(nodes[:5])}"
            f"{' …' if len(nodes) > 5 else ''}); they resume from their last checkpoint elsewhere",
            jobs=tuple(j.id for j in moved[:MAX_NAMED]),
            nodes=tuple(nodes[:MAX_NAMED]),
        )

    def _defragment_domain(self, job, domain, classes, by_node, now, overhead):
        fleet = self.fleet
        options = []
        for i in domain.node_indices:
            if not fleet.is_eligible(i, classes) or fleet.is_whole_free(i):
                continue
            jobs = by_node[i]
            if not jobs or not all(_is_movable(j, fleet) for j in jobs):
                continue
            cost = sum(displacement_cost_gpu_hours(j, now, overhead) for j in jobs)
            options.append((cost, fleet.nodes[i].name, i, jobs))
        options.sort(key=lambda o: (o[0], o[1]))
        moved: dict[int, Job] = {}
        freed: list[str] = []
        released: list[Job] = []
        try:
            for cost, name, i, jobs in options:
                for j in jobs:
                    if j.id not in moved:
                        moved[j.id] = j
                        fleet.release_placement(j.placement, j)
                        released.append(j)
                freed.append(name)
                if fleet.place(job, within=domain) is not None:
                    # The moved jobs must fit back outside the freed nodes: count the free GPUs left elsewhere.
                    moved_gpus = sum(j.gpus for j in moved.values())
                    free_elsewhere = sum(
                        max(0, fleet.free[k]) for k in range(len(fleet.nodes))
                        if fleet.is_eligible(k, classes) and k not in domain.node_indices
                    ) + max(0, fleet.free_gpus_in(domain, classes) - job.gpus)
                    if moved_gpus > free_elsewhere:
                        return None
                    total = sum(displacement_cost_gpu_hours(j, now, overhead) for j in moved.values())
                    return total, sorted(moved.values(), key=lambda j: j.id), freed
            return None
        finally:
            for j in released:
                fleet.allocate_placement(j.placement, j)

    def _preempt(self, job: Job, queue: Queue, blocking: str, verdict: Pending | None) -> Fix | None:
        planned = self.plans.get(job.id)
        if planned is not None:
            return _preempt_fix(planned.plan, job, planned.needs_approval, proposed=True)
        if not self.config.preemption_enabled or not queue.preemption.may_preempt_within_queue:
            return None
        key = (job.queue, job.shape, job.priority)
        if key in self._preempt_cache:
            return self._preempt_cache[key]
        if self.preemption_budget <= 0:
            return None
        self.preemption_budget -= 1
        reason = PendingReason.QUOTA if blocking == Level.QUOTA else PendingReason.FIT
        plan = self.plan(job, reason)
        fix = None
        if plan is not None:
            approved = self.snapshot.approved_preemptions.get(job.id)
            fix = _preempt_fix(plan, job, needs_approval(plan, job, self.config, approved), proposed=False)
        self._preempt_cache[key] = fix
        return fix

    def plan(self, job: Job, reason: PendingReason) -> PreemptionPlan | None:
        """The core's preemption plan for `job` on this state (what the cycle would plan)."""
        candidates = candidate_victims(job, self.snapshot.queues, self.holding.values(), self.ledger, protected=self.protected)
        return plan_preemption(job, candidates=candidates, fleet=self.fleet, ledger=self.ledger, now=self.snapshot.now,
                               config=self.config, reason=reason)

    # -- summary ----------------------------------------------------------------------------------

    def _summary(self, job, blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts, health: HealthFacts,
                 order: str, never: bool) -> str:
        # `blocking` names the level; the summary is the sentence a person reads after it.
        if blocking == Level.QUOTA:
            text = quota.message
        elif blocking == Level.FIT:
            text = fit.message
        elif blocking == Level.NODES:
            text = f"the flavor has room, but {nodes.message}"
        elif blocking == Level.HEALTH:
            text = f"it would fit if every device were healthy; {health.message}"
        elif blocking == Level.ORDER:
            text = f"it would fit now, but {order}"
        else:
            text = "fits quota and placement now: starts on the next pass"
        if never:
            text += " (waiting alone will never start it)"
        return text

    def _headline(self, job: Job, queue: Queue, blocking, quota: QuotaFacts, fit: FitFacts, nodes: NodeFacts,
                  health: HealthFacts, order: str, never: bool, fixes: tuple[Fix, ...]) -> str:
        """The conclusion first, in words a researcher uses; the levels below keep the arithmetic."""
        preempt = next((f for f in fixes if f.action == Action.PREEMPT), None)
        by_admin = "which needs an admin" if preempt is not None and preempt.needs_approval else "which Gangway does by itself"
        flavor = job.flavor
        if blocking == Level.QUOTA and quota.limit == QuotaLimit.LENT_OUT:
            teams = {self.snapshot.queues[name].team for name, _ in quota.borrowers if name in self.snapshot.queues} - {queue.team}
            text = f"Team {queue.team}'s {flavor} quota is lent to {_count(len(teams), 'other team')}"
            if preempt is not None:
                text += f"; Gangway can take {quota.short_by} GPUs back by preempting {_count(len(preempt.jobs), 'job')}, {by_admin}"
            else:
                text += "; it comes back as their jobs end"
            preempt = None
        elif blocking == Level.QUOTA and quota.limit == QuotaLimit.NO_QUOTA:
            text = f"Queue {job.queue} has no {flavor} quota"
        elif blocking == Level.QUOTA and quota.limit == QuotaLimit.NOMINAL:
            text = (f"Queue {job.queue} has {_count(max(0, quota.nominal - quota.used), 'free ' + flavor + ' GPU')} of its "
                    f"{quota.nominal} and this job needs {quota.requested}")
        elif blocking == Level.QUOTA and quota.limit == QuotaLimit.BORROWING_LIMIT:
            text = f"Starting it would take queue {job.queue} past its {flavor} borrowing limit of {quota.borrowing_limit} GPUs"
        elif blocking == Level.QUOTA:
            text = f"Queue {job.queue} has used its {flavor} quota and the cohort has {quota.cohort_can_lend} GPUs left to lend"
        elif blocking == Level.FIT and fit.fragmentation.is_fragmented and fit.whole_free_nodes < fit.whole_nodes_needed:
            text = (f"There are {fit.free_gpus} free {flavor} GPUs, but scattered: the gang needs "
                    f"{_count(fit.whole_nodes_needed, 'whole node')} and {fit.whole_free_nodes} are free")
        elif blocking == Level.FIT and fit.required_level and fit.free_gpus >= fit.needed_gpus:
            largest = fit.largest_domain.free_gpus if fit.largest_domain else 0
            text = (f"No single {fit.required_level} has room for the gang: it needs {fit.needed_gpus} GPUs in one "
                    f"{fit.required_level}, the roomiest has {largest} free")
        elif blocking == Level.FIT:
            text = f"The fleet has {fit.free_gpus} free {flavor} GPUs and this job needs {fit.needed_gpus}"
        elif blocking == Level.NODES:
            text = f"No node can take one of its {nodes.pod_gpus}-GPU pods right now ({nodes.eligible} of {nodes.total} could)"
        elif blocking == Level.HEALTH:
            text = f"It would fit if every GPU were healthy: {_count(health.count, 'node')} report missing GPUs"
        elif blocking == Level.PRIORITY_CLASS:
            text = (f"Team {queue.team} already runs as many GPUs at priority class {job.priority_class} as a team may; "
                    f"it starts as those jobs end, or sooner at a lower class")
        elif blocking == Level.ORDER:
            text = f"It fits now but waits its turn: {order}"
        else:
            return "It fits now and starts on the next pass."
        if preempt is not None:
            text += f"; Gangway can make room by preempting {_count(len(preempt.jobs), 'job')}, {by_admin}"
        if never:
            text += "; waiting alone will never start it"
        return text + "."


def _count(n: int, noun: str) -> str:
    """`1 job`, `3 jobs`; `1 free GPU`, `2 free GPUs` (the last word takes the plural)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_job_id = operator.attrgetter("id")


def _preempt_fix(plan: PreemptionPlan, job: Job, approval: bool, *, proposed: bool) -> Fix:
    victims = ", ".join(f"#{v.job_id} ({v.team}, {v.gpus} GPUs, {v.cost_gpu_hours:.1f} GPU-h)" for v in plan.victims[:5])
    more = " …" if len(plan.victims) > 5 else ""
    state = "proposed, awaiting an admin's approval" if proposed and approval else ("needs an admin's approval" if approval else "runs automatically")
    return Fix(
        Action.PREEMPT, plan.cost_gpu_hours, plan.teams_affected, approval,
        f"preempt {len(plan.victims)} job(s) in {plan.domain}, {victim_rules(plan, job.queue)}: {victims}{more}; {state}",
        jobs=tuple(v.job_id for v in plan.victims),
    )


def victim_rules(plan: PreemptionPlan, queue: str) -> str:
    """Which rule chose the victims, e.g. "preempting 2 lower-priority jobs of its queue and reclaiming
    16 GPUs lent to speech" (a victim of another queue is always a reclaim: see preemption.py)."""
    own = sum(1 for v in plan.victims if v.queue == queue)
    lent: dict[str, int] = {}
    for victim in plan.victims:
        if victim.queue != queue:
            lent[victim.queue] = lent.get(victim.queue, 0) + victim.gpus
    rules = []
    if own:
        rules.append(f"preempting {own} lower-priority job{'' if own == 1 else 's'} of its queue")
    if lent:
        rules.append("reclaiming " + ", ".join(f"{gpus} GPUs lent to {name}" for name, gpus in sorted(lent.items())))
    return " and ".join(rules)


def _is_movable(job: Job, fleet: FleetState) -> bool:
    """Small (no pod fills a node), checkpointing and preemptible: it can resume elsewhere cheaply."""
    if not job.is_preemptible or not job.checkpoint_interval_s:
        return False
    width = max(fleet.class_width) if fleet.class_width else 0
    return all(ps.gpus_per_pod < width for ps in job.pod_sets)


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


# --- entry points -----------------------------------------------------------------------------------


def explain(
    job: Job,
    fleet: FleetState,
    ledger: QuotaLedger,
    snapshot: Snapshot,
    *,
    holding: Iterable[Job] | None = None,
    verdict: Pending | None = None,
    plans: Iterable[PlannedPreemption] = (),
    protected: Iterable[int] = (),
) -> Explanation:
    """Why `job` is pending on this fleet state and ledger (holding defaults to the snapshot's admitted jobs)."""
    explainer = Explainer(snapshot, fleet, ledger, snapshot.admitted if holding is None else holding,
                          plans=plans, protected=protected)
    return explainer.explain(job, verdict)


@dataclass
class PassExplanations:
    """One pass: an explanation per pending job (shared between jobs of one shape) and each job's place in its queue."""

    by_job: dict[int, Explanation] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)
    """Job id → how many pending jobs of its queue go before it (the core's order)."""
    shapes: int = 0


def _note_attained_service(queued: list[Job], by_job: dict, levels: tuple[float, ...]) -> None:
    """Jobs that ran before wait behind the fresher jobs of their queue (SchedulerConfig.service_levels_gpu_h):
    say so, with the count. Only such jobs are touched (few: the preempted and evicted), so shapes stay shared."""
    ahead_by_level: dict[int, int] = {}
    for job in queued:
        level = service_level(job.attained_gpu_s, levels)
        if job.attained_gpu_s and level:
            fresher = sum(count for lower, count in ahead_by_level.items() if lower < level)
            note = (f"has already run {job.attained_gpu_s / 3600:.1f} GPU-hours (attained-service level {level}): "
                    f"waits behind {_count(fresher, 'job')} of its queue with less attained service")
            by_job[job.id] = replace(by_job[job.id], attained_service=note, summary=f"{by_job[job.id].summary}; {note}")
        ahead_by_level[level] = ahead_by_level.get(level, 0) + 1


def explain_pending(snapshot: Snapshot, result: CycleResult, **options) -> PassExplanations:
    """Explain every job the cycle left pending, once per distinct shape, against the state after the cycle.

    Queue heads go first, so the budget of preemption plans goes to the jobs that may preempt next.
    """
    explainer = Explainer.after_cycle(snapshot, result, **options)
    verdicts = result.pending.by_job()
    out = PassExplanations()
    by_queue: dict[str, list[Job]] = {}
    for job in snapshot.pending:
        if job.id in verdicts:
            by_queue.setdefault(job.queue, []).append(job)
    position = out.position
    levels = snapshot.config.service_levels_gpu_h
    for queued in by_queue.values():
        sort_queue(queued, levels)
        position.update(zip(map(_job_id, queued), range(len(queued))))
    explain_one, by_job, cache = explainer.explain, out.by_job, explainer._cache
    for queued in by_queue.values():
        head = queued[0]
        by_job[head.id] = explain_one(head, Pending(head.id, *verdicts[head.id]))
    plain = (PendingReason.QUOTA, PendingReason.FIT, PendingReason.NODES, PendingReason.HEALTH)
    for queued in by_queue.values():
        for job in queued:
            # The hot path over 100,000 jobs: one tuple and one dictionary lookup per job.
            verdict = verdicts[job.id]
            if verdict[0] in plain:
                explanation = cache.get((job.queue, job.flavor, job.pod_sets, job.topology, job.tolerations, job.priority))
                if explanation is not None:
                    by_job[job.id] = explanation
                    continue
            by_job[job.id] = explain_one(job, Pending(job.id, *verdict))
    if levels:
        for queued in by_queue.values():
            _note_attained_service(queued, by_job, levels)
    out.shapes = len(explainer._cache)
    return out
