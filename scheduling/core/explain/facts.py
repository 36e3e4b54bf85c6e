"""The explanation's vocabulary: the levels, the machine reasons and fix actions (StrEnums), the facts of each level,
the fixes, and `Explanation` itself with its JSON form (the shape the ExplanationOut serializer declares)."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from scheduling.core.model import PendingReason

MAX_NAMED = 10
"""Nodes, racks, jobs named in one list; the counts carry the rest."""


class Level(enum.StrEnum):
    """The level of the isolation that blocks a job (the values of the PendingReasons it reports)."""

    QUOTA = PendingReason.QUOTA.value
    FIT = PendingReason.FIT.value
    NODES = PendingReason.NODES.value
    HEALTH = PendingReason.HEALTH.value
    ORDER = PendingReason.ORDER.value
    PRIORITY_CLASS = PendingReason.PRIORITY_CLASS.value


class NodeReason(enum.StrEnum):
    """Why one node cannot take one of the gang's largest pods: the first that applies, in this order."""

    WRONG_FLAVOR = "wrong_flavor"
    NOT_READY = "not_ready"
    CORDONED = "cordoned"
    UNTOLERATED_TAINT = "untolerated_taint"
    UNHEALTHY = "unhealthy_devices"
    INSUFFICIENT_GPUS = "insufficient_gpus"


class Action(enum.StrEnum):
    """What a fix does."""

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


class VictimRule(enum.StrEnum):
    """Which rule of core.preemption makes a job a victim (Kueue's preemption reasons, with ours first)."""

    IDLE = "idle"
    """Flagged idle (core.idle): taken first, whatever its queue and priority; it loses no work since it went idle."""
    RECLAIM = "reclaim"
    """Holds quota its queue borrowed from the cohort."""
    WITHIN_QUEUE = "within_queue"
    """A job of the preemptor's own queue of lower priority."""
    ATTAINED_SERVICE = "attained_service"
    """A job of the preemptor's own queue, of no lower priority, served a whole level longer (core.attained)."""


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
class VictimFacts:
    """One job a preempt fix stops, and why it is chosen."""

    job_id: int
    queue: str
    team: str
    gpus: int
    rule: str
    """A VictimRule value."""
    cost_gpu_hours: float
    """Its displacement: the work it loses plus its restart."""
    lost_work_gpu_hours: float
    """Work since its last checkpoint (time spent idle is none): 0 for a job idle since its start or last checkpoint."""
    idle_since: float | None = None
    """For an idle victim, since when (epoch seconds)."""

    @property
    def is_idle(self) -> bool:
        return self.rule == VictimRule.IDLE

    def to_dict(self) -> dict:
        return {
            "job": self.job_id, "queue": self.queue, "team": self.team, "gpus": self.gpus, "rule": self.rule,
            "cost_gpu_hours": round(self.cost_gpu_hours, 3), "lost_work_gpu_hours": round(self.lost_work_gpu_hours, 3),
            "idle_since": iso(self.idle_since),
        }


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
    victims: tuple[VictimFacts, ...] = ()
    """A preempt fix's victims, each with the rule that chose it (the idle ones first in its detail and headline)."""
    declined: str = ""
    """Why the scheduler does not run this preemption now although it could (core.payoff: it would not pay, GPUs come
    back soon on their own, it waits for a checkpoint); empty when it runs, or awaits an admin."""

    @property
    def idle_victims(self) -> tuple[VictimFacts, ...]:
        return tuple(v for v in self.victims if v.is_idle)

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "cost_gpu_hours": round(self.cost_gpu_hours, 3),
            "teams_affected": list(self.teams_affected),
            "needs_approval": self.needs_approval,
            "detail": self.detail,
            "jobs": list(self.jobs),
            "nodes": list(self.nodes),
            "victims": [victim.to_dict() for victim in self.victims],
            "declined": self.declined,
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
