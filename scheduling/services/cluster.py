"""Cluster writes: sync the nodes the watcher sees into Node rows, turn discovered workloads into jobs,
and create the cluster workload of a job submitted through Gangway with a pod template."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q

from scheduling import clock
from scheduling.cluster.base import Cluster, DiscoveredWorkload, WorkloadPhase, WorkloadRef
from scheduling.core.model import JobState
from scheduling.core.model import Node as CoreNode
from scheduling.fleetfile import FleetSpec, NodeSpec
from scheduling.models import EventReason, Flavor, FleetSettings, Job, JobEvent, Node, Queue, ReconcileState, TeamNamespace, WorkloadRejection
from scheduling.models.jobs import HOLDING_STATES
from scheduling.selectors.splitting import SETTLED_AFTER_S, submission_hours_forget
from scheduling.services.common import MAX_JOB_NAME_LENGTH, reconcile_after_commit, to_datetime
from scheduling.services.fleet import FleetSyncResult, fleet_sync
from scheduling.services.jobs import job_event, pending_job_create, workload_spec
from scheduling.services.priority_classes import priority_class_resolve

logger = logging.getLogger("scheduling.cluster")

CLUSTER_USERNAME = "gangway-cluster"
"""Owner of the jobs discovered in the cluster (an inactive user: it never signs in)."""
JOB_ID_ANNOTATION = "gangway.dev/job-id"  # scheduling.cluster.kubernetes.names.JOB_ID_ANNOTATION, without importing the client


# --- nodes ----------------------------------------------------------------------------------------


@transaction.atomic
def cluster_nodes_sync(*, nodes: Iterable[CoreNode], topology: Iterable[str]) -> FleetSyncResult:
    """Make the Node rows and topology levels match the cluster. Holds the reconcile row lock, so a pass
    never admits onto a node this removes. A node that vanished (or changed flavor) while it holds pods
    of admitted jobs is kept, not ready, until the readiness timeout evicts them; then it goes."""
    ReconcileState.objects.get_or_create(pk=1)
    ReconcileState.objects.select_for_update().get(pk=1)
    nodes = list(nodes)
    busy = {
        row.name: row
        for row in Node.objects.select_related("flavor").annotate(
            active_pods=Count("placements", filter=Q(placements__job__state__in=HOLDING_STATES))
        ).filter(active_pods__gt=0)
    }
    specs = {}
    for node in nodes:
        flavor = node.flavor
        held = busy.get(node.name)
        if held is not None and held.flavor.name != flavor:
            logger.warning("node %s changed flavor %s → %s while holding pods; keeping %s until they leave",
                           node.name, held.flavor.name, flavor, held.flavor.name)
            flavor = held.flavor.name
        specs[node.name] = NodeSpec(
            name=node.name,
            flavor=flavor,
            capacity_gpus=node.capacity_gpus,
            allocatable_gpus=min(node.allocatable_gpus, node.capacity_gpus),
            labels=dict(node.labels),
            taints=[{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
            is_ready=node.is_ready,
            is_unschedulable=node.is_cordoned,
            external_gpus=node.external_gpus,
        )
    for name, row in busy.items():
        if name not in specs:
            logger.warning("node %s left the cluster while holding %s pods; kept as not ready until they are evicted", name, row.active_pods)
            specs[name] = NodeSpec(
                name=name, flavor=row.flavor.name, capacity_gpus=row.capacity_gpus, allocatable_gpus=row.allocatable_gpus,
                labels=dict(row.labels or {}), taints=list(row.taints or []), is_ready=False,
                is_unschedulable=row.is_unschedulable, external_gpus=row.external_gpus,
            )
    return fleet_sync(fleet=FleetSpec(topology=tuple(topology), nodes=tuple(specs[name] for name in sorted(specs))))


# --- workloads ------------------------------------------------------------------------------------


@dataclass
class WorkloadSyncResult:
    created: list[int] = field(default_factory=list)
    linked: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    """namespace/name of every workload refused, with the reason recorded as a WorkloadRejection."""
    cancelled: list[int] = field(default_factory=list)


def cluster_user():
    user, created = get_user_model().objects.get_or_create(username=CLUSTER_USERNAME, defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _rejection_reason(
    workload: DiscoveredWorkload, queues: dict[str, Queue], flavors: dict[str, Flavor], levels: list[str],
    namespace_owners: dict[str, TeamNamespace],
) -> tuple[str, str] | None:
    where = f"{workload.kind} {workload.namespace}/{workload.name}"
    if workload.spec.queue not in queues:
        return "unknown_queue", (f"{where}: unknown queue {workload.spec.queue!r} (label gangway.dev/queue or kueue.x-k8s.io/queue-name); "
                                 f"known queues: {sorted(queues)}")
    owner = namespace_owners.get(workload.namespace)
    queue = queues[workload.spec.queue]
    if owner is not None and owner.team_id != queue.team_id:
        return "namespace_not_owned", (f"{where}: namespace {workload.namespace!r} belongs to team {owner.team.name}, which does "
                                       f"not own queue {queue.name!r} (team {queue.team.name})")
    if not workload.spec.flavor:
        return "no_flavor", (f"{where}: no GPU flavor: set the gangway.dev/flavor annotation or a nodeSelector on the "
                             f"flavor label; known flavors: {sorted(flavors)}")
    if workload.spec.flavor not in flavors:
        return "unknown_flavor", f"{where}: no node has flavor {workload.spec.flavor!r}; known flavors: {sorted(flavors)}"
    for pod_set in workload.spec.pod_sets:
        if pod_set.count <= 0:
            return "no_gpus", f"{where}: pod set {pod_set.name!r} has {pod_set.count} pods; every pod set of a gang runs at least one"
    if workload.spec.gpus <= 0:
        # A role without GPUs (a launcher) is part of a GPU gang; a gang without any GPU is not Gangway's.
        shape = ", ".join(f"{p.name} {p.count} × {p.gpus_per_pod}" for p in workload.spec.pod_sets)
        return "no_gpus", f"{where}: no pod set asks for GPUs ({shape}); Gangway admits GPU gangs only"
    for label, level in (("topology-required", workload.spec.topology_required), ("topology-preferred", workload.spec.topology_preferred)):
        if level and level not in levels:
            return "unknown_topology_level", f"{where}: gangway.dev/{label} {level!r} is not a topology level; the fleet has {levels}"
    for label, value in (("runtime-limit-seconds", workload.spec.runtime_limit_s), ("checkpoint-interval-seconds", workload.spec.checkpoint_interval_s)):
        if value is not None and value <= 0:
            return "invalid_annotation", f"{where}: gangway.dev/{label} must be a positive number of seconds, not {value}"
    return None


@transaction.atomic
def cluster_workloads_sync(
    *, workloads: Iterable[DiscoveredWorkload], cluster: Cluster | None = None, now: float | None = None
) -> WorkloadSyncResult:
    """Every labelled, suspended workload becomes one pending job: deduplicated by namespace/name and by the
    gangway.dev/job-id annotation (set on workloads Gangway created or released). A workload Gangway cannot
    take is recorded as a WorkloadRejection and logged, never raised. With `cluster`, a pending discovered job
    whose workload the cluster confirms deleted is cancelled."""
    now = clock.moment(now)
    moment = to_datetime(now)
    result = WorkloadSyncResult()
    workloads = list(workloads)
    listed = {(w.namespace, w.name) for w in workloads}
    known = {
        (row["cluster_namespace"], row["cluster_name"]): row["id"]
        for row in Job.objects.exclude(cluster_name="").values("id", "cluster_namespace", "cluster_name")
    }
    queues = {q.name: q for q in Queue.objects.select_related("team")}
    namespace_owners = {ns.name: ns for ns in TeamNamespace.objects.select_related("team")}
    flavors = {f.name: f for f in Flavor.objects.all()}
    levels = list(FleetSettings.load().topology_levels)
    rejections = {(r.namespace, r.name): r for r in WorkloadRejection.objects.all()}
    owner = None
    for workload in workloads:
        key = (workload.namespace, workload.name)
        if key in known:
            continue
        job_id = workload.annotations.get(JOB_ID_ANNOTATION, "")
        if job_id.isdigit() and Job.objects.filter(pk=int(job_id), cluster_name="").update(
            cluster_namespace=workload.namespace, cluster_name=workload.name
        ):
            result.linked.append(int(job_id))
            continue
        if job_id.isdigit() and Job.objects.filter(pk=int(job_id)).exists():
            continue  # already the workload of another Gangway job: never adopt it twice
        refused = _rejection_reason(workload, queues, flavors, levels, namespace_owners)
        priority_class = None
        if refused is None and workload.spec.priority_class:
            try:
                priority_class = priority_class_resolve(name=workload.spec.priority_class, team=queues[workload.spec.queue].team)
            except ValidationError as error:
                refused = ("unknown_priority_class",
                           f"{workload.kind} {workload.namespace}/{workload.name}: {error.message_dict['priority_class'][0]}")
        if refused is not None:
            reason, message = refused
            previous = rejections.get(key)
            if previous is None or previous.message != message:
                logger.warning("not managing %s", message)
            WorkloadRejection.objects.update_or_create(
                namespace=workload.namespace, name=workload.name,
                defaults={"queue": workload.spec.queue, "reason": reason, "message": message, "last_seen_at": moment},
                create_defaults={"queue": workload.spec.queue, "reason": reason, "message": message,
                                 "first_seen_at": moment, "last_seen_at": moment},
            )
            result.rejected.append(f"{workload.namespace}/{workload.name}")
            continue
        owner = owner or cluster_user()
        job, _ = pending_job_create(
            spec=workload.spec, owner=owner, queue=queues[workload.spec.queue], flavor=flavors[workload.spec.flavor],
            priority=priority_class.value if priority_class else workload.spec.priority,
            name=f"{workload.namespace}/{workload.name}"[:MAX_JOB_NAME_LENGTH], priority_class=priority_class,
            # Its place in the queue is when it was created (never later than now: clocks drift).
            submitted_at=to_datetime(min(now, workload.created_at)) if workload.created_at else moment,
            tolerations=[dict(t) for t in workload.tolerations],
            cluster_namespace=workload.namespace, cluster_name=workload.name, cluster_kind=workload.kind,
        )
        if job.submitted_at.timestamp() < now - SETTLED_AFTER_S:
            submission_hours_forget(job.submitted_at)  # the gaming signals counted its hour without it
        job_event(job_id=job.pk, from_state="", to_state=JobState.PENDING, reason=EventReason.DISCOVERED,
                  message=f"suspended {workload.kind} {workload.namespace}/{workload.name} found in the cluster").save()
        known[key] = job.pk
        result.created.append(job.pk)
    # A rejection lasts while its workload is listed unaccepted: fixed or deleted workloads drop theirs.
    stale = [r.pk for key, r in rejections.items() if key not in listed or key in known]
    WorkloadRejection.objects.filter(pk__in=stale).delete()
    if cluster is not None:
        result.cancelled = _cancel_deleted(cluster=cluster, listed=listed, now=now)
    if result.created or result.linked or result.cancelled:
        reconcile_after_commit()
    return result


def _cancel_deleted(*, cluster: Cluster, listed: set[tuple[str, str]], now: float) -> list[int]:
    """Pending discovered jobs whose workload is gone from the listing *and* confirmed missing by the cluster."""
    candidates = [
        row for row in Job.objects.filter(
            state=JobState.PENDING.value, applied_generation=0, pod_template__isnull=True
        ).exclude(cluster_name="").values("id", "cluster_namespace", "cluster_name", "cluster_kind")
        if (row["cluster_namespace"], row["cluster_name"]) not in listed
    ]
    if not candidates:
        return []
    refs = [WorkloadRef(job_id=r["id"], generation=0, namespace=r["cluster_namespace"], name=r["cluster_name"], kind=r["cluster_kind"])
            for r in candidates]
    statuses = cluster.workload_statuses(refs, now)
    gone = [ref for ref in refs if (status := statuses.get(ref.job_id)) is not None and status.phase is WorkloadPhase.MISSING]
    if not gone:
        return []
    # Compare-and-set per job: one admitted meanwhile is the pass's to handle, not cancelled here.
    gone = [
        ref for ref in gone
        if Job.objects.filter(pk=ref.job_id, state=JobState.PENDING.value, applied_generation=0)
        .update(state=JobState.CANCELLED.value, finished_at=to_datetime(now), explanation_key="")
    ]
    JobEvent.objects.bulk_create(
        job_event(job_id=ref.job_id, from_state=JobState.PENDING, to_state=JobState.CANCELLED, reason=EventReason.WORKLOAD_DELETED,
                  message=f"{ref.kind} {ref.namespace}/{ref.name} was deleted from the cluster")
        for ref in gone
    )
    return [ref.job_id for ref in gone]


# --- workloads Gangway creates ----------------------------------------------------------------------


def workload_create(*, job_id: int, cluster=None) -> WorkloadRef:
    """Create the suspended, gated Job of a job submitted with a pod template. Idempotent per job id, so the
    submission's after-commit hook and every reconcile pass before release may all call it."""
    if cluster is None:
        from scheduling.cluster.registry import get_cluster

        cluster = get_cluster()
    job = Job.objects.select_related("queue", "flavor").get(pk=job_id)
    return cluster.create_workload(namespace=job.cluster_namespace, name=job.cluster_name, spec=workload_spec(job),
                                   pod_template=job.pod_template, job_id=job.pk)
