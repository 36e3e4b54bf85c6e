"""The one translator from ORM rows and cluster state into the core's Snapshot."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable

from django.conf import settings

from scheduling.cluster.base import Cluster
from scheduling.core.model import (
    Job,
    JobState,
    PendingReason,
    PlannedPreemption,
    PodPlacement,
    PodSet,
    PreemptionPlan,
    PreemptionPolicy,
    Queue,
    QueueingStrategy,
    Quota,
    SchedulerConfig,
    Snapshot,
    Toleration,
    TopologyRequest,
    Victim,
)
from scheduling.models import FleetSettings, IdleJob, PlanStatus, PreemptionVictim, PriorityClass, QueueUsage
from scheduling.models import Job as JobRow
from scheduling.models import Placement as PlacementRow
from scheduling.models import PodSet as PodSetRow
from scheduling.models import Queue as QueueRow
from scheduling.models.jobs import HOLDING_STATES, JOB_QUEUE_ORDER

ID_CHUNK = 2000
JOB_FIELDS = (
    "id",
    "queue_id",
    "queue__name",
    "queue__team__name",
    "flavor__name",
    "priority",
    "submitted_at",
    "topology_required",
    "topology_preferred",
    "runtime_limit_s",
    "checkpoint_interval_s",
    "is_preemptible",
    "tolerations",
    "state",
    "admitted_at",
    "started_at",
    "ready_pods",
    "evictions",
    "backoff_until",
    "preempted_by_id",
    "priority_class__name",
    "attained_gpu_s",
    "admission_generation",
    "explanation_key",
)


@dataclass
class SnapshotContext:
    """What the persist step needs besides the snapshot: row ids the core does not know."""

    pod_set_ids: dict[tuple[int, str], int] = field(default_factory=dict)
    gpus_in_use_by_queue: dict[str, int] = field(default_factory=dict)
    versions: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Each job's (state, admission generation) as snapshotted: what the persist step expects to change."""
    open_plans: dict[int, "OpenPlan"] = field(default_factory=dict)
    """Per job: its proposed or approved plan row (services.plans settles the pass's plans against them)."""


def _epoch(moment) -> float | None:
    return moment.timestamp() if moment is not None else None


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), ID_CHUNK):
        yield ids[start : start + ID_CHUNK]


def queue_rows() -> list[QueueRow]:
    """Every queue with its team, cohort and quotas, by name."""
    return list(QueueRow.objects.select_related("team", "cohort").prefetch_related("quotas__flavor"))


def queues_load(rows: list[QueueRow] | None = None) -> dict[str, Queue]:
    return {
        row.name: Queue(
            name=row.name,
            team=row.team.name,
            cohort=row.cohort.name if row.cohort else None,
            weight=row.weight,
            strategy=QueueingStrategy(row.strategy),
            preemption=PreemptionPolicy(row.preemption_policy),
            quotas={
                quota.flavor.name: Quota(
                    nominal=quota.nominal, borrowing_limit=quota.borrowing_limit, lending_limit=quota.lending_limit
                )
                for quota in row.quotas.all()
            },
        )
        for row in (queue_rows() if rows is None else rows)
    }


def pending_window_rows(queue_id: int, per_queue_cap: int) -> list[dict]:
    """A queue's head of line, in (priority desc, submit time, id) order: the job_pending_order index."""
    return list(
        JobRow.objects.filter(state=JobState.PENDING.value, queue_id=queue_id)
        .order_by(*JOB_QUEUE_ORDER)
        .values(*JOB_FIELDS)[:per_queue_cap]
    )


def holding_rows() -> list[dict]:
    """Every job holding GPUs, by id."""
    return list(JobRow.objects.filter(state__in=HOLDING_STATES).order_by("id").values(*JOB_FIELDS))


def jobs_from_rows(rows: list[dict], context: SnapshotContext) -> list[Job]:
    """Core jobs of `rows` (in their order) with their pod sets, and placements for those holding GPUs; records
    their pod set ids and versions in `context`."""
    ids = [row["id"] for row in rows]
    holding = [row["id"] for row in rows if row["state"] in HOLDING_STATES]
    pod_sets: dict[int, list[PodSet]] = defaultdict(list)
    placements: dict[int, list[PodPlacement]] = defaultdict(list)
    for chunk in _chunks(ids):
        for ps in PodSetRow.objects.filter(job_id__in=chunk).order_by("job_id", "id").values_list("id", "job_id", "name", "count", "gpus_per_pod"):
            pod_sets[ps[1]].append(PodSet(name=ps[2], count=ps[3], gpus_per_pod=ps[4]))
            context.pod_set_ids[(ps[1], ps[2])] = ps[0]
    for chunk in _chunks(holding):
        for job_id, pod_set, index, node in (
            PlacementRow.objects.filter(job_id__in=chunk)
            .order_by("job_id", "pod_set_id", "pod_index")
            .values_list("job_id", "pod_set__name", "pod_index", "node__name")
        ):
            placements[job_id].append(PodPlacement(pod_set=pod_set, index=index, node=node))
    jobs = []
    for row in rows:
        context.versions[row["id"]] = (row["state"], row["admission_generation"])
        job_pod_sets = tuple(pod_sets[row["id"]])
        pods = sum(ps.count for ps in job_pod_sets)
        jobs.append(
            Job(
                id=row["id"],
                queue=row["queue__name"],
                team=row["queue__team__name"],
                flavor=row["flavor__name"],
                pod_sets=job_pod_sets,
                priority=row["priority"],
                submitted_at=_epoch(row["submitted_at"]),
                topology=TopologyRequest(required=row["topology_required"] or None, preferred=row["topology_preferred"] or None),
                runtime_limit_s=row["runtime_limit_s"],
                checkpoint_interval_s=row["checkpoint_interval_s"],
                is_preemptible=row["is_preemptible"],
                tolerations=tuple(Toleration(**t) for t in row["tolerations"] or ()),
                state=JobState(row["state"]),
                placement=tuple(placements[row["id"]]),
                admitted_at=_epoch(row["admitted_at"]),
                started_at=_epoch(row["started_at"]),
                are_pods_ready=pods > 0 and row["ready_pods"] >= pods,
                evictions=row["evictions"],
                backoff_until=_epoch(row["backoff_until"]),
                preempted_by=row["preempted_by_id"],
                priority_class=row["priority_class__name"],
                attained_gpu_s=row["attained_gpu_s"],
            )
        )
    return jobs


def priority_class_caps_load() -> dict[str, int]:
    return dict(PriorityClass.objects.filter(max_gpus_per_team__isnull=False).values_list("name", "max_gpus_per_team"))


@dataclass(frozen=True)
class OpenPlan:
    """A proposed or approved plan row, as the core knows plans (victims with the costs stored when planned)."""

    row_id: int
    is_approved: bool
    planned: PlannedPreemption


def open_plans_load() -> dict[int, OpenPlan]:
    """Per job: its open plan (proposed, or approved and not yet executed), as the core made it, in one query."""
    victims: dict[int, list[Victim]] = defaultdict(list)
    plans: dict[int, tuple] = {}
    for plan_id, job_id, status, awaits, domain, reason, fingerprint, victim_id, queue, team, gpus, cost in PreemptionVictim.objects.filter(
        plan__status__in=[PlanStatus.PROPOSED, PlanStatus.APPROVED]
    ).order_by("plan_id", "job_id").values_list(
        "plan_id", "plan__job_id", "plan__status", "plan__needs_approval", "plan__domain", "plan__reason", "plan__state_fingerprint",
        "job_id", "job__queue__name", "job__queue__team__name", "gpus", "cost_gpu_hours",
    ):
        plans[plan_id] = (job_id, status == PlanStatus.APPROVED, awaits and status == PlanStatus.PROPOSED, domain, reason, fingerprint)
        victims[plan_id].append(Victim(victim_id, queue, team, gpus, cost))
    return {
        job_id: OpenPlan(plan_id, is_approved,
                         PlannedPreemption(PreemptionPlan(job_id, tuple(victims[plan_id]), domain, PendingReason(reason)), awaits, fingerprint))
        for plan_id, (job_id, is_approved, awaits, domain, reason, fingerprint) in plans.items()
    }


def scheduler_config() -> SchedulerConfig:
    """The settings' GANGWAY_SCHEDULER overrides; the idle grace period is the one usage collection flags jobs by."""
    overrides = {"idle_grace_s": settings.GANGWAY_IDLE_GRACE_S, **(getattr(settings, "GANGWAY_SCHEDULER", {}) or {})}
    return SchedulerConfig(**overrides)


def idle_since_load() -> dict[int, float]:
    """Per job flagged idle by the last usage collection (IdleJob): since when it has been idle (IdleJob.since), so its
    work before then counts as work a preemption would lose."""
    return {job_id: since.timestamp() for job_id, since in IdleJob.objects.values_list("job_id", "since")}


def with_idle_flags(admitted: tuple[Job, ...], idle_since: dict[int, float]) -> tuple[Job, ...]:
    if not idle_since and not any(job.idle_since is not None for job in admitted):
        return admitted
    return tuple(job if job.idle_since == idle_since.get(job.id) else replace(job, idle_since=idle_since.get(job.id))
                 for job in admitted)


def snapshot_build(*, now: float, cluster: Cluster) -> tuple[Snapshot, SnapshotContext]:
    """Nodes from the cluster; queues, quotas, admitted and (capped, ordered) pending jobs from the database,
    all read now. The reconcile pass reads through its cache instead (snapshot_cache), to the same result."""
    context = SnapshotContext()
    rows = queue_rows()
    admitted = jobs_from_rows(holding_rows(), context)
    cap = settings.GANGWAY_PENDING_PER_QUEUE
    pending = jobs_from_rows([job for row in rows for job in pending_window_rows(row.pk, cap)], context)
    return snapshot_assemble(now=now, nodes=tuple(cluster.list_nodes()), queues=queues_load(rows), admitted=tuple(admitted),
                             pending=tuple(pending), context=context), context


def snapshot_assemble(*, now: float, nodes: tuple, queues: dict[str, Queue], admitted: tuple[Job, ...], pending: tuple[Job, ...],
                      context: SnapshotContext) -> Snapshot:
    """The snapshot of these jobs, nodes and queues with the rest of the state read now (usage, open plans, priority
    class caps, settings); records each queue's GPUs in use and the open plans in `context`."""
    context.open_plans = open_plans = open_plans_load()
    admitted = with_idle_flags(admitted, idle_since_load())
    for job in admitted:
        context.gpus_in_use_by_queue[job.queue] = context.gpus_in_use_by_queue.get(job.queue, 0) + job.gpus
    return Snapshot(
        now=now,
        topology=tuple(FleetSettings.load().topology_levels),
        nodes=nodes,
        queues=queues,
        admitted=admitted,
        pending=pending,
        historical_usage=dict(QueueUsage.objects.values_list("queue__name", "usage_gpu_s")),
        approved_preemptions={job_id: p.planned.plan.victim_ids for job_id, p in open_plans.items() if p.is_approved},
        priority_class_caps=priority_class_caps_load(),
        awaiting_plans={job_id: p.planned for job_id, p in open_plans.items() if p.planned.needs_approval},
        config=scheduler_config(),
    )
