"""The reconcile pass: observe the cluster, snapshot, run the core, persist decisions, then apply them.

Over 400 lines for a reason: the steps share one transaction, its row lock and one ReconcileResult, each a named
function here in the order the pass runs them; what they call (snapshots, plans, explanations, the cluster) lives
elsewhere."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum

from scheduling import clock
from scheduling.cluster.base import Cluster, GangRelease, WorkloadPhase, WorkloadRef
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage
from scheduling.core.model import CycleResult, JobState, PodPlacement
from scheduling.models import EventReason, Job, JobEvent, Node, Placement, PlanStatus, PodSet, PreemptionPlan, PreemptionVictim, Queue, QueueUsage, ReconcileState
from scheduling.models.jobs import HOLDING_STATES
from scheduling.models.preemption import OPEN_PLAN_STATUSES
from scheduling.services.cluster import workload_create
from scheduling.services.common import to_datetime
from scheduling.services.explanations import explanations_refresh
from scheduling.services.fleet import fleet_summary_record
from scheduling.services.jobs import job_event
from scheduling.services.plans import SettledPlans, plans_settle
from scheduling.snapshot_cache import PASS_CACHE, SnapshotCache
from scheduling.snapshots import SnapshotContext

logger = logging.getLogger("scheduling.reconcile")

REQUEUE_RESET = {
    "state": JobState.PENDING.value,
    "admitted_at": None,
    "started_at": None,
    "ready_pods": 0,
    "is_borrowing": False,
}


@dataclass
class ReconcileResult:
    admitted: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    proposed_plans: list[int] = field(default_factory=list)
    pending: int = 0
    released: list[int] = field(default_factory=list)
    suspended: list[int] = field(default_factory=list)
    apply_failed: list[int] = field(default_factory=list)
    """Jobs the cluster refused to release or suspend this pass; the next pass tries again."""
    phases_s: dict[str, float] = field(default_factory=dict)
    """Wall time of each step of the pass (observe, snapshot, cycle, persist, explain, apply)."""
    lost_races: list[int] = field(default_factory=list)
    """Jobs changed since the snapshot (cancelled while the pass ran): left as they are, decided again next pass."""


def reconcile_pass_run(*, now: float | None = None, cluster: Cluster | None = None) -> ReconcileResult:
    """One idempotent pass. Decisions commit in one transaction that holds the reconcile row lock;
    applying them to the cluster happens after commit and is keyed by (job id, admission generation)."""
    if cluster is None:
        from scheduling.cluster.registry import get_cluster

        cluster = get_cluster()
    now = clock.moment(now)
    with PASS_CACHE.lock:
        return _pass(cache=PASS_CACHE, now=now, cluster=cluster)


def _pass(*, cache: SnapshotCache, now: float, cluster: Cluster) -> ReconcileResult:
    result = ReconcileResult()
    phase = _phase_timer(result.phases_s)
    with transaction.atomic():
        state = _lock_pass()
        with phase("observe"):
            _observe_workloads(cluster=cluster, now=now, result=result)
        with phase("snapshot"):
            cached = cache.snapshot(now=now, cluster=cluster, passes=state.passes, explanations_version=state.explanations_version)
            snapshot, context = cached.snapshot, cached.context
        with phase("cycle"):
            settled = plans_settle(snapshot=snapshot, decisions=run_admission_cycle(snapshot), open_plans=context.open_plans)
            decisions = settled.decisions
        with phase("persist"):
            _persist(decisions=decisions, context=context, now=now, result=result, settled=settled)
        _queue_usage_update(context=context, now=now, last_pass_at=state.last_pass_at.timestamp() if state.last_pass_at else None,
                            half_life_s=snapshot.config.usage_half_life_s,
                            pending_gpus=_pending_gpus(snapshot, result, cached.partial_queue_ids)
                            if cached.is_changed or result.admitted or result.preempted or result.evicted else None)
        state.last_pass_at = to_datetime(now)
        state.passes = F("passes") + 1
        state.lost_races = F("lost_races") + len(result.lost_races)
        state.save(update_fields=["last_pass_at", "passes", "lost_races"])
    cache.committed(cached.pass_number)
    _fault_after_commit(result)
    with phase("apply"):
        _apply(cluster=cluster, now=now, result=result)
    # After commit, outside the row lock: submissions and quota edits need not wait for explanations. A row
    # that left pending meanwhile is skipped; one whose state changed is explained again by the next pass.
    if cached.is_fleet_changed or result.admitted or result.finished or result.preempted or result.evicted:
        with phase("fleet"):
            fleet_summary_record()
    written = 0
    if _explanations_due(cache=cache, cached=cached, decisions=decisions, result=result, now=now):
        with phase("explain"):
            written = explanations_refresh(snapshot=snapshot, decisions=decisions, now=now, stored=cache.stored)
            cache.explained_at = now
    ReconcileState.objects.filter(pk=1).update(
        last_pass_phases_s={name: round(s, 4) for name, s in result.phases_s.items()},
        cluster_errors=F("cluster_errors") + len(result.apply_failed),
        explanations_version=F("explanations_version") + (1 if written else 0),
    )
    if written:
        # explanations_refresh is the one writer of explanations; another worker's pass in between makes this process
        # read the stored fingerprints again next pass. (The estimates task writes only the estimate fields.)
        version = ReconcileState.objects.values_list("explanations_version", flat=True).get(pk=1)
        cache.explanations_version = version if version == state.explanations_version + 1 else None
    if result.admitted or result.finished or result.preempted or result.evicted:
        logger.info(
            "reconcile: admitted %s started %s finished %s preempted %s evicted %s",
            result.admitted, result.started, result.finished, result.preempted, result.evicted,
        )
    return result


def _explanations_due(*, cache: SnapshotCache, cached, decisions: CycleResult, result: ReconcileResult, now: float) -> bool:
    """Explain when anything an explanation is made of may have changed: the rows, nodes, queues or plans the
    snapshot holds, or the cycle's decisions. What changes with time alone (how long a victim has run, when a
    running job should end) is brought up to date every GANGWAY_EXPLAIN_REFRESH_S."""
    return (
        cached.is_changed or bool(result.admitted or result.evicted or result.proposed_plans or result.lost_races)
        or cache.explained_at is None or now - cache.explained_at >= settings.GANGWAY_EXPLAIN_REFRESH_S
    )


def _phase_timer(phases_s: dict[str, float]):
    @contextlib.contextmanager
    def phase(name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            phases_s[name] = time.perf_counter() - started

    return phase


# 1 -- the singleton guard ------------------------------------------------------------------------
def _lock_pass() -> ReconcileState:
    ReconcileState.objects.get_or_create(pk=1)
    return ReconcileState.objects.select_for_update().get(pk=1)


def _fault_after_commit(result: ReconcileResult) -> None:
    """Test hook (GANGWAY_FAULT_AFTER_COMMIT=1): kill this process after a pass that admitted something has
    committed and before it applies anything, the crash the next pass must heal. Never set it in production."""
    if settings.GANGWAY_FAULT_AFTER_COMMIT and result.admitted:
        logger.error("GANGWAY_FAULT_AFTER_COMMIT: exiting after commit, before applying %s", result.admitted)
        logging.shutdown()
        os._exit(1)


def _transition(job_id: int, *, expected: tuple[str, int], result: ReconcileResult, what: str, **changes) -> bool:
    """Compare-and-set: change the job only while it still has the (state, admission generation) the pass decided
    on. A job changed meanwhile (a cancel that committed during the pass) is never overwritten: the lost race is
    logged and counted, and the next pass decides again from what is then true."""
    state, generation = expected
    if Job.objects.filter(pk=job_id, state=state, admission_generation=generation).update(**changes):
        return True
    logger.warning("reconcile: job %s is no longer %s (admission %s) as the pass saw it; not %s, the next pass decides again",
                   job_id, state, generation, what)
    result.lost_races.append(job_id)
    return False


def _ref(job: dict, generation: int) -> WorkloadRef:
    return WorkloadRef(job_id=job["id"], generation=generation, namespace=job["cluster_namespace"], name=job["cluster_name"],
                       kind=job["cluster_kind"])


# 2 -- observe the cluster --------------------------------------------------------------------------
def _observe_workloads(*, cluster: Cluster, now: float, result: ReconcileResult) -> None:
    """Released gangs: all pods running → running; finished → succeeded/failed; lost → release again."""
    released = list(
        Job.objects.filter(state__in=HOLDING_STATES, applied_generation__gt=0).values(
            "id", "state", "admission_generation", "applied_generation", "ready_pods", "cluster_namespace", "cluster_name",
            "cluster_kind",
        )
    )
    if not released:
        return
    statuses = cluster.workload_statuses([_ref(j, j["applied_generation"]) for j in released], now)
    pods = _pods_by_job([j["id"] for j in released if j["state"] == JobState.ADMITTED])  # running ones are ready already
    events = []
    moment = to_datetime(now)
    for job in released:
        status = statuses.get(job["id"])
        if status is None or job["applied_generation"] != job["admission_generation"]:
            continue
        expected = (job["state"], job["admission_generation"])
        if status.phase is WorkloadPhase.MISSING:
            _transition(job["id"], expected=expected, result=result, what="marked for release again", applied_generation=0)
            continue
        if status.generation and status.generation != job["admission_generation"]:
            continue
        if status.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED):
            final = JobState.SUCCEEDED if status.phase is WorkloadPhase.SUCCEEDED else JobState.FAILED
            if _transition(job["id"], expected=expected, result=result, what=final.value, state=final.value, finished_at=moment):
                Placement.objects.filter(job_id=job["id"]).delete()  # placements are the current admission's only
                events.append(job_event(job_id=job["id"], from_state=job["state"], to_state=final, reason=EventReason(final.value)))
                result.finished.append(job["id"])
            continue
        ready = status.ready_pods
        if ready != job["ready_pods"] and not _transition(job["id"], expected=expected, result=result, what="updated", ready_pods=ready):
            continue
        if (
            job["state"] == JobState.ADMITTED
            and status.phase is WorkloadPhase.RUNNING
            and ready >= pods.get(job["id"], 0)
            and _transition(job["id"], expected=expected, result=result, what=JobState.RUNNING.value, state=JobState.RUNNING.value,
                            started_at=moment, ready_pods=ready)
        ):
            events.append(
                job_event(job_id=job["id"], from_state=JobState.ADMITTED, to_state=JobState.RUNNING, reason=EventReason.PODS_READY,
                          message=f"all {ready} pods running")
            )
            result.started.append(job["id"])
    JobEvent.objects.bulk_create(events)


def _pods_by_job(job_ids: list[int]) -> dict[int, int]:
    return dict(PodSet.objects.filter(job_id__in=job_ids).values("job_id").annotate(pods=Sum("count")).values_list("job_id", "pods"))


# 3 -- persist the decisions ------------------------------------------------------------------------
def _current_run_gpu_s(job_ids: list[int], now: float) -> dict[int, float]:
    """GPU-seconds of each stopping job's current run: added to its attained service (core.attained)."""
    rows = Job.objects.filter(pk__in=job_ids, started_at__isnull=False).values_list("id", "gpus", "started_at")
    return {job_id: gpus * max(0.0, now - started_at.timestamp()) for job_id, gpus, started_at in rows}


def _persist(*, decisions: CycleResult, context: SnapshotContext, now: float, result: ReconcileResult, settled: SettledPlans) -> None:
    """Every decision is a compare-and-set against the job as snapshotted (see _transition): a job cancelled
    while the pass ran stays cancelled, and an admission that lost its race preempts nobody."""
    moment = to_datetime(now)
    events = []
    versions = context.versions
    node_ids = dict(Node.objects.values_list("name", "id"))
    run_gpu_s = _current_run_gpu_s([*(v for a in decisions.admissions for v in a.preempted),
                                    *(e.job_id for e in decisions.evictions)], now)

    # Evictions first: they free GPUs the admissions below may use.
    for eviction in decisions.evictions:
        if _requeue(eviction.job_id, expected=versions[eviction.job_id], via=JobState.EVICTED, reason=EventReason.PODS_NOT_READY,
                    message=eviction.message, events=events, result=result,
                    extra={"evictions": F("evictions") + 1, "backoff_until": to_datetime(eviction.backoff_until),
                           "attained_gpu_s": F("attained_gpu_s") + run_gpu_s.get(eviction.job_id, 0.0)}):
            result.evicted.append(eviction.job_id)

    placements = []
    approvals = _approved_plans({a.job_id for a in decisions.admissions})
    for admission in decisions.admissions:
        expected = versions[admission.job_id]
        if not _transition(
            admission.job_id, expected=expected, result=result, what=JobState.ADMITTED.value,
            state=JobState.ADMITTED.value, admitted_at=moment, started_at=None, ready_pods=0,
            admission_generation=F("admission_generation") + 1, is_borrowing=admission.is_borrowing,
            explanation_key="", estimated_start=None, estimated_at=None,  # requeued later, it is explained afresh
        ):
            continue
        preempted = [
            victim_id for victim_id in admission.preempted
            if _requeue(victim_id, expected=versions[victim_id], via=JobState.PREEMPTED, reason=EventReason.PREEMPTED,
                        message=_victim_message(admission.job_id, approvals), events=events, result=result,
                        extra={"preempted_by_id": admission.job_id,
                               "attained_gpu_s": F("attained_gpu_s") + run_gpu_s.get(victim_id, 0.0)})
        ]
        result.preempted.extend(preempted)
        placements.extend(_placement_rows(admission.job_id, admission.placement, context, node_ids))
        nodes = len({p.node for p in admission.placement})
        message = f"{len(admission.placement)} pods on {nodes} nodes" + (" (borrowing from the cohort)" if admission.is_borrowing else "")
        if preempted:
            message += f"; preempted jobs {', '.join(map(str, preempted))}"
        events.append(job_event(job_id=admission.job_id, from_state=expected[0], to_state=JobState.ADMITTED, reason=EventReason.ADMITTED,
                                message=message))
        result.admitted.append(admission.job_id)
    Placement.objects.bulk_create(placements, batch_size=1000)

    _persist_plans(decisions=decisions, settled=settled, admitted_ids=set(result.admitted), result=result, moment=moment)

    # Pending jobs' explanations: explanations_refresh, right after this step.
    # Preempted and evicted gangs are pending again too, though they held GPUs when the pass began.
    result.pending = len(decisions.pending) + len(result.preempted) + len(result.evicted)
    JobEvent.objects.bulk_create(events, batch_size=1000)


def _approved_plans(job_ids: set[int]) -> dict[int, tuple[int, str]]:
    """Job id → (plan id, approver's username) of the approved plans the pass may execute for these jobs."""
    rows = PreemptionPlan.objects.filter(job_id__in=job_ids, status=PlanStatus.APPROVED).values_list("job_id", "pk", "decided_by__username")
    return {job_id: (plan_id, approver or "an admin") for job_id, plan_id, approver in rows}


def _victim_message(job_id: int, approvals: dict[int, tuple[int, str]]) -> str:
    """A victim's event names the plan and who approved it (a plan that needs no approval runs on its own)."""
    if job_id in approvals:
        plan_id, approver = approvals[job_id]
        return f"preempted by plan #{plan_id} for job #{job_id}, approved by {approver}"
    return f"preempted for job #{job_id} by a plan that needed no approval"


def _requeue(job_id: int, *, expected: tuple[str, int], via: JobState, reason: str, message: str, events: list,
             result: ReconcileResult, extra: dict) -> bool:
    """Admitted/running → preempted or evicted → pending, keeping the original submit time. False if the job
    changed since the snapshot (it no longer holds its GPUs then: cancelled or finished)."""
    if not _transition(job_id, expected=expected, result=result, what=via.value, **REQUEUE_RESET, **extra):
        return False
    Placement.objects.filter(job_id=job_id).delete()
    events.append(job_event(job_id=job_id, from_state=expected[0], to_state=via, reason=reason, message=message))
    events.append(job_event(job_id=job_id, from_state=via, to_state=JobState.PENDING, reason=EventReason.REQUEUED, message="keeps its submit time"))
    return True


def _placement_rows(job_id: int, placement: tuple[PodPlacement, ...], context: SnapshotContext, node_ids: dict[str, int]):
    gpus_by_pod_set = {}
    if placement:
        gpus_by_pod_set = dict(PodSet.objects.filter(job_id=job_id).values_list("name", "gpus_per_pod"))
    for pod in placement:
        yield Placement(
            job_id=job_id,
            pod_set_id=context.pod_set_ids[(job_id, pod.pod_set)],
            pod_index=pod.index,
            node_id=node_ids[pod.node],
            gpus=gpus_by_pod_set[pod.pod_set],
        )


def _persist_plans(*, decisions: CycleResult, settled: SettledPlans, admitted_ids: set[int], result: ReconcileResult, moment) -> None:
    """One open plan per job: the row that stands for the job's plan is updated in place (services.plans keeps
    a plan while it makes room), any other open row of the job is superseded, and a new plan gets a new row."""
    open_plans = {p.job_id: p for p in PreemptionPlan.objects.filter(status__in=OPEN_PLAN_STATUSES)}
    open_victims = defaultdict(set)
    for plan_id, victim_id in PreemptionVictim.objects.filter(plan__in=list(open_plans.values())).values_list("plan_id", "job_id"):
        open_victims[plan_id].add(victim_id)
    kept: set[int] = set(settled.waiting)
    for planned in decisions.preemptions:
        plan = planned.plan
        is_executed = plan.job_id in admitted_ids and not planned.needs_approval
        existing = open_plans.get(plan.job_id)
        if existing is not None and (settled.rows.get(plan.job_id) == existing.pk or open_victims[existing.pk] == set(plan.victim_ids)):
            _plan_row_update(existing, planned, victims_before=open_victims[existing.pk], is_executed=is_executed, moment=moment)
            kept.add(existing.pk)
            continue
        if existing is not None:
            existing.status = PlanStatus.SUPERSEDED
            existing.save(update_fields=["status"])
            del open_plans[plan.job_id]
        row = PreemptionPlan.objects.create(
            job_id=plan.job_id,
            domain=plan.domain,
            reason=plan.reason.value,
            cost_gpu_hours=round(plan.cost_gpu_hours, 3),
            teams_affected=list(plan.teams_affected),
            needs_approval=planned.needs_approval,
            state_fingerprint=planned.fingerprint,
            status=PlanStatus.EXECUTED if is_executed else PlanStatus.PROPOSED,
            decided_at=moment if is_executed else None,
        )
        PreemptionVictim.objects.bulk_create(
            PreemptionVictim(plan=row, job_id=v.job_id, gpus=v.gpus, cost_gpu_hours=round(v.cost_gpu_hours, 3)) for v in plan.victims
        )
        kept.add(row.pk)
        if not is_executed:
            result.proposed_plans.append(row.pk)
    # Open plans that no longer stand are stale: their job was admitted otherwise, left, or no longer needs them.
    PreemptionPlan.objects.filter(status__in=OPEN_PLAN_STATUSES).exclude(pk__in=kept).update(status=PlanStatus.SUPERSEDED)


def _plan_row_update(row: PreemptionPlan, planned, *, victims_before: set[int], is_executed: bool, moment) -> None:
    """The same plan, as it stands now: victims that left or are no longer needed leave it; executed once it ran."""
    plan, changed = planned.plan, []
    if set(plan.victim_ids) != victims_before:
        PreemptionVictim.objects.filter(plan=row).exclude(job_id__in=plan.victim_ids).delete()
        row.cost_gpu_hours, row.teams_affected = round(plan.cost_gpu_hours, 3), list(plan.teams_affected)
        changed += ["cost_gpu_hours", "teams_affected"]
    if is_executed:
        row.status = PlanStatus.EXECUTED
        row.decided_at = row.decided_at or moment
        changed += ["status", "decided_at"]
    elif planned.fingerprint and row.state_fingerprint != planned.fingerprint:  # proposed again, on a changed state
        row.state_fingerprint = planned.fingerprint
        changed.append("state_fingerprint")
    if changed:
        row.save(update_fields=changed)


def _queue_usage_update(*, context: SnapshotContext, now: float, last_pass_at: float | None, half_life_s: float,
                        pending_gpus: dict[str, dict[str, int]] | None) -> None:
    """Decay each queue's usage by the time since the last pass; record its pending GPUs when they were counted again."""
    elapsed_s = 0.0 if last_pass_at is None else max(0.0, now - last_pass_at)
    if elapsed_s <= 0 and pending_gpus is None:
        return
    rows = list(QueueUsage.objects.select_related("queue"))
    for row in rows:
        if elapsed_s > 0:
            row.usage_gpu_s = decay_usage(row.usage_gpu_s, context.gpus_in_use_by_queue.get(row.queue.name, 0), elapsed_s, half_life_s)
            row.updated_at = to_datetime(now)
        if pending_gpus is not None:
            row.pending_gpus = pending_gpus.get(row.queue.name, {})
    QueueUsage.objects.bulk_update(rows, ["usage_gpu_s", "updated_at", *(["pending_gpus"] if pending_gpus is not None else [])])


def _pending_gpus(snapshot, result: ReconcileResult, partial_queue_ids: list[int]) -> dict[str, dict[str, int]]:
    """Per queue and flavor, the GPUs its pending jobs ask for once this pass's decisions hold: counted from the
    snapshot, and in the database for the queues with more pending jobs than the snapshot holds."""
    admitted, requeued = set(result.admitted), {*result.preempted, *result.evicted}
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in snapshot.pending:
        if job.id not in admitted:
            totals[job.queue][job.flavor] += job.gpus
    for job in snapshot.admitted:
        if job.id in requeued:
            totals[job.queue][job.flavor] += job.gpus
    if partial_queue_ids:
        counted = Job.objects.filter(state=JobState.PENDING.value, queue_id__in=partial_queue_ids)
        for name in Queue.objects.filter(pk__in=partial_queue_ids).values_list("name", flat=True):
            totals[name] = defaultdict(int)
        for queue, flavor, gpus in counted.values("queue__name", "flavor__name").annotate(gpus=Sum("gpus")).values_list(
            "queue__name", "flavor__name", "gpus"
        ):
            totals[queue][flavor] = gpus
    return {queue: dict(by_flavor) for queue, by_flavor in totals.items()}


# 4 -- apply after commit ---------------------------------------------------------------------------
def _apply(*, cluster: Cluster, now: float, result: ReconcileResult) -> None:
    """Release every admission not yet applied; suspend every released gang that no longer holds GPUs.
    Keyed by (job id, admission generation), so a crash between commit and here is healed next pass.
    One job the cluster refuses (deleted meanwhile, API down) is logged and retried next pass; it never
    stops the others."""
    fields = ("id", "admission_generation", "applied_generation", "cluster_namespace", "cluster_name", "cluster_kind", "pod_template")
    to_release = list(Job.objects.filter(state__in=HOLDING_STATES, admission_generation__gt=F("applied_generation")).values(*fields))
    if to_release:
        placements = defaultdict(list)
        for job_id, pod_set, index, node in (
            Placement.objects.filter(job_id__in=[j["id"] for j in to_release])
            .order_by("job_id", "pod_set_id", "pod_index")
            .values_list("job_id", "pod_set__name", "pod_index", "node__name")
        ):
            placements[job_id].append(PodPlacement(pod_set=pod_set, index=index, node=node))
        for job in to_release:
            generation = job["admission_generation"]
            try:
                if job["pod_template"] is not None and cluster.creates_workloads:
                    workload_create(job_id=job["id"], cluster=cluster)  # idempotent: heals a submission whose creation was lost
                if job["applied_generation"]:
                    # Re-admitted before the previous admission was suspended (a crash in between): stop it first.
                    cluster.suspend(_ref(job, job["applied_generation"]), now)
                cluster.release(GangRelease(_ref(job, generation), tuple(placements[job["id"]])), now)
            except Exception:  # noqa: BLE001 - the next pass tries again
                logger.warning("reconcile: releasing job %s (admission %s) failed; retrying next pass", job["id"], generation, exc_info=True)
                result.apply_failed.append(job["id"])
                continue
            Job.objects.filter(pk=job["id"], admission_generation=generation).update(applied_generation=generation)
            result.released.append(job["id"])
    stopped = [JobState.PENDING.value, JobState.CANCELLED.value, JobState.PREEMPTED.value, JobState.EVICTED.value]
    for job in Job.objects.filter(state__in=stopped, applied_generation__gt=0).values(*fields):
        try:
            cluster.suspend(_ref(job, job["applied_generation"]), now)
        except Exception:  # noqa: BLE001
            logger.warning("reconcile: suspending job %s failed; retrying next pass", job["id"], exc_info=True)
            result.apply_failed.append(job["id"])
            continue
        Job.objects.filter(pk=job["id"], applied_generation=job["applied_generation"]).update(applied_generation=0)
        result.suspended.append(job["id"])
    # Pod events the watcher missed would leave a released gang gated; advance every such gang here too.
    try:
        cluster.pin_released_gangs()
    except Exception:  # noqa: BLE001
        logger.warning("reconcile: pinning released gangs failed; retrying next pass", exc_info=True)
