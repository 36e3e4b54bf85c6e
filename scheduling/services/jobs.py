"""Job writes: submit a gang, cancel it, and record every state change as a JobEvent."""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max, Sum

from scheduling import clock
from scheduling.cluster.base import WorkloadSpec
from scheduling.core.model import JobState
from scheduling.core.model import PodSet as CorePodSet
from scheduling.models import AuditAction, EventReason, Flavor, FleetSettings, Job, JobEvent, PodSet, PriorityClass, Queue
from scheduling.permissions import can_cancel_job, can_submit_to_team, is_admin
from scheduling.pod_templates import pod_template_violations
from scheduling.services.audit import audit_record
from scheduling.services.common import (MAX_JOB_NAME_LENGTH, MAX_NAME_LENGTH, MAX_PRIORITY, Errors, is_count,
                                        reconcile_after_commit, to_datetime)
from scheduling.services.priority_classes import priority_class_resolve
from scheduling.tasks import create_workload

MAX_POD_SETS = 8
logger = logging.getLogger("scheduling.jobs")


def job_event(*, job_id: int, from_state: str, to_state: str, reason: str, message: str = "", actor=None) -> JobEvent:
    """An unsaved event; callers bulk-create them inside their transaction."""
    return JobEvent(job_id=job_id, from_state=from_state, to_state=to_state, reason=reason, message=message, actor=actor)


def _validate_pod_sets(errors: Errors, pod_sets) -> list[dict]:
    if not isinstance(pod_sets, list) or not pod_sets:
        errors.add("pod_sets", "must be a non-empty list of {name, count, gpus_per_pod}")
        return []
    if len(pod_sets) > MAX_POD_SETS:
        errors.add("pod_sets", f"at most {MAX_POD_SETS} pod sets")
        return []
    clean, names = [], set()
    for i, pod_set in enumerate(pod_sets):
        field = f"pod_sets.{i}"
        if not isinstance(pod_set, dict):
            errors.add(field, "must be an object {name, count, gpus_per_pod}")
            continue
        name, count, gpus_per_pod = pod_set.get("name", "main"), pod_set.get("count"), pod_set.get("gpus_per_pod")
        is_valid = True
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
            errors.add(f"{field}.name", f"must be a non-empty string of at most {MAX_NAME_LENGTH} characters")
            is_valid = False
        elif name in names:
            errors.add(f"{field}.name", f"duplicate pod set name {name!r}")
            is_valid = False
        names.add(name)
        if not is_count(count) or count <= 0:
            errors.add(f"{field}.count", "must be an integer > 0")
            is_valid = False
        if not is_count(gpus_per_pod) or gpus_per_pod <= 0:
            errors.add(f"{field}.gpus_per_pod", "must be an integer > 0")
            is_valid = False
        if is_valid:
            clean.append({"name": name, "count": count, "gpus_per_pod": gpus_per_pod})
    return clean


def _validate_topology(errors: Errors, required: str | None, preferred: str | None) -> None:
    if not required and not preferred:
        return
    levels = list(FleetSettings.load().topology_levels)
    known = levels or ["(none: the fleet has no topology levels)"]
    for field, level in (("topology.required", required), ("topology.preferred", preferred)):
        if level and level not in levels:
            errors.add(field, f"unknown topology level {level!r}; the fleet has {known}")
    if required in levels and preferred in levels and levels.index(preferred) < levels.index(required):
        errors.add("topology.preferred", f"{preferred!r} is coarser than the required level {required!r}; prefer the same or a finer level")


def _validate_pod_template(errors: Errors, pod_template, pod_sets: list[dict]) -> None:
    if pod_template is None:
        if settings.GANGWAY_CLUSTER == "kubernetes":
            errors.add("pod_template", "required on a Kubernetes cluster: Gangway creates the gang's Job from it "
                                       "(or create a suspended Job labelled gangway.dev/queue in the cluster)")
        return
    for field, reason in pod_template_violations(pod_template):
        errors.add(field, reason)
    if len(pod_sets) > 1:
        errors.add("pod_sets", "a job with a pod template runs exactly one pod set (one batch/v1 Job)")


def _pod_template_tolerations(pod_template: dict) -> list[dict]:
    """The template's tolerations as a discovered Job's are read: the same translation for both paths."""
    from scheduling.cluster.kubernetes.templates import template_tolerations

    return [dict(t) for t in template_tolerations(pod_template["spec"])]


def _team_namespace(team) -> str:
    """Where the team's jobs are created: the first namespace it owns, else GANGWAY_NAMESPACE."""
    owned = team.namespaces.order_by("name").values_list("name", flat=True).first()
    return owned or settings.GANGWAY_NAMESPACE


def _resolve_class(errors: Errors, name, queue: Queue | None) -> PriorityClass | None:
    if queue is None:
        return None
    try:
        return priority_class_resolve(name=name, team=queue.team)
    except ValidationError as error:
        for reason in error.message_dict["priority_class"]:
            errors.add("priority_class", reason)
        return None


def workload_name(name: str, job_id: int) -> str:
    """A DNS-1123 name for the job's Job in the cluster, short enough for its pods' names too."""
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40].strip("-") or "job"
    return f"{slug}-{job_id}"


def _create_workload_after_commit(job_id: int) -> None:
    try:
        create_workload.delay(job_id)
    except Exception:  # noqa: BLE001 - the reconcile pass creates it before releasing the job
        logger.warning("could not ask a worker to create the cluster workload of job %s", job_id, exc_info=True)


def pending_job_create(*, spec: WorkloadSpec, owner, queue: Queue, flavor: Flavor, priority: int, name: str,
                       priority_class: PriorityClass | None, submitted_at, **cluster_fields) -> tuple[Job, list[PodSet]]:
    """The pending job row and its pod set rows for the gang `spec` describes (submitted, or discovered in the cluster:
    `cluster_fields` then name its workload); `queue` and `flavor` are the rows `spec` names."""
    job = Job.objects.create(
        owner=owner, queue=queue, name=name, flavor=flavor, priority=priority, priority_class=priority_class,
        topology_required=spec.topology_required or "", topology_preferred=spec.topology_preferred or "",
        runtime_limit_s=spec.runtime_limit_s, checkpoint_interval_s=spec.checkpoint_interval_s,
        is_preemptible=spec.is_preemptible, gpus=spec.gpus, submitted_at=submitted_at, state=JobState.PENDING.value,
        **cluster_fields,
    )
    pod_sets = PodSet.objects.bulk_create(
        PodSet(job=job, name=p.name, count=p.count, gpus_per_pod=p.gpus_per_pod) for p in spec.pod_sets)
    return job, pod_sets


def workload_spec(job: Job) -> WorkloadSpec:
    """The gang a stored job describes (its queue, flavor and pod sets read), as a cluster adapter takes it."""
    return WorkloadSpec(
        queue=job.queue.name, flavor=job.flavor.name,
        pod_sets=tuple(CorePodSet(name=p.name, count=p.count, gpus_per_pod=p.gpus_per_pod) for p in job.pod_sets.all()),
        priority=job.priority, topology_required=job.topology_required or None,
        topology_preferred=job.topology_preferred or None, runtime_limit_s=job.runtime_limit_s,
        checkpoint_interval_s=job.checkpoint_interval_s, is_preemptible=job.is_preemptible,
    )


@transaction.atomic
def job_submit(
    *,
    user,
    queue_name: str,
    flavor_name: str,
    name: str,
    pod_sets: list[dict],
    priority_class: str | None = None,
    priority: int | None = None,
    topology_required: str | None = None,
    topology_preferred: str | None = None,
    runtime_limit_s: int | None = None,
    checkpoint_interval_s: int | None = None,
    is_preemptible: bool = True,
    pod_template: dict | None = None,
    now: float | None = None,
    validate_only: bool = False,
) -> Job | None:
    """Validate and store a pending gang, returned with the pod set rows and event written (`written`); a reconcile
    pass runs after commit. With a pod template the gang
    is also created in a Kubernetes cluster (GANGWAY_CLUSTER=kubernetes) as a suspended, gated Job.
    The job runs at `priority_class` (None: the default class) and gets its value; only admins give a raw
    `priority`, which then overrides the class's value. `validate_only`: check everything, store nothing."""
    errors = Errors()
    queue = Queue.objects.filter(name=queue_name).select_related("team").first() if isinstance(queue_name, str) else None
    if queue is None:
        errors.add("queue", f"unknown queue {queue_name!r}")
    elif not can_submit_to_team(user, queue.team_id):
        raise PermissionDenied(f"only members of team {queue.team.name} submit into queue {queue.name}")
    # The flavor with its fleet's largest node and total GPUs, in one query (the pod sets are checked against them).
    flavor = (Flavor.objects.filter(name=flavor_name).annotate(largest=Max("nodes__allocatable_gpus"), total=Sum("nodes__allocatable_gpus"))
              .first() if isinstance(flavor_name, str) else None)
    if flavor is None:
        errors.add("flavor", f"unknown flavor {flavor_name!r}")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_JOB_NAME_LENGTH:
        errors.add("name", f"must be a non-empty string of at most {MAX_JOB_NAME_LENGTH} characters")
    if priority is not None and not is_admin(user):
        errors.add("priority", "only admins set a raw priority; choose a priority_class instead")
    elif priority is not None and (not is_count(priority) or abs(priority) > MAX_PRIORITY):
        errors.add("priority", f"must be an integer between -{MAX_PRIORITY} and {MAX_PRIORITY}")
    chosen_class = _resolve_class(errors, priority_class, queue)
    for field, value in (("runtime_limit_s", runtime_limit_s), ("checkpoint_interval_s", checkpoint_interval_s)):
        if value is not None and (not is_count(value) or value <= 0):
            errors.add(field, "must be null or an integer > 0 (seconds)")
    if not isinstance(is_preemptible, bool):
        errors.add("preemptible", "must be true or false")
    _validate_topology(errors, topology_required or None, topology_preferred or None)
    clean_pod_sets = _validate_pod_sets(errors, pod_sets)
    _validate_pod_template(errors, pod_template, clean_pod_sets)

    if flavor is not None and clean_pod_sets:
        largest, total = flavor.largest or 0, flavor.total or 0
        for i, pod_set in enumerate(clean_pod_sets):
            if pod_set["gpus_per_pod"] > largest:
                errors.add(
                    f"pod_sets.{i}.gpus_per_pod",
                    f"{pod_set['gpus_per_pod']} GPUs per pod, but the largest {flavor.name} node has {largest} allocatable",
                )
        gang_gpus = sum(p["count"] * p["gpus_per_pod"] for p in clean_pod_sets)
        if gang_gpus > total:
            errors.add("pod_sets", f"the gang needs {gang_gpus} {flavor.name} GPUs; the whole fleet has {total} allocatable")
        cap = chosen_class.max_gpus_per_team if chosen_class is not None else None
        if cap is not None and gang_gpus > cap:
            errors.add("priority_class", f"the gang needs {gang_gpus} GPUs; a team may run at most {cap} at {chosen_class.name}")
    errors.raise_if_any()
    if validate_only:
        return None

    spec = WorkloadSpec(
        queue=queue.name, flavor=flavor.name, pod_sets=tuple(CorePodSet(**pod_set) for pod_set in clean_pod_sets),
        priority=priority if priority is not None else (chosen_class.value if chosen_class is not None else 0),
        topology_required=topology_required or None, topology_preferred=topology_preferred or None,
        runtime_limit_s=runtime_limit_s, checkpoint_interval_s=checkpoint_interval_s, is_preemptible=is_preemptible,
    )
    job, pod_set_rows = pending_job_create(spec=spec, owner=user, queue=queue, flavor=flavor, priority=spec.priority,
                                           name=name.strip(), priority_class=chosen_class,
                                           submitted_at=to_datetime(clock.moment(now)))
    event = job_event(job_id=job.pk, from_state="", to_state=JobState.PENDING, reason=EventReason.SUBMITTED, actor=user)
    event.save()
    job.written = (pod_set_rows, event)  # what a caller shows of the new job without reading it back (job_submitted)
    if pod_template is not None:
        job.pod_template = pod_template
        job.tolerations = _pod_template_tolerations(pod_template)
        job.cluster_namespace = _team_namespace(queue.team)
        job.cluster_name = workload_name(job.name, job.pk)
        job.save(update_fields=["pod_template", "tolerations", "cluster_namespace", "cluster_name"])
        if settings.GANGWAY_CLUSTER == "kubernetes":
            transaction.on_commit(lambda: _create_workload_after_commit(job.pk))
    reconcile_after_commit()
    return job


@transaction.atomic
def job_cancel(*, user, job_id: int, reason: str = "") -> Job:
    """Cancel a job that has not finished: its GPUs are free at once, and a released gang is suspended on the
    cluster by the pass this asks for (the web holds no cluster credentials)."""
    job = Job.objects.select_for_update().select_related("queue").filter(pk=job_id).first()
    if job is None:
        raise Job.DoesNotExist(job_id)
    if not can_cancel_job(user, job):
        raise PermissionDenied("only the job's owner, a lead of its team or an admin cancels it")
    if JobState(job.state).is_final:
        raise ValidationError({"state": [f"job {job.pk} is already {job.state}"]})
    previous = job.state
    # The row lock above makes a pass that admits this job concurrently wait for this commit; its own
    # compare-and-set then finds the job cancelled and leaves it (see reconcile._transition).
    Job.objects.filter(pk=job.pk, state=previous).update(state=JobState.CANCELLED.value, finished_at=to_datetime(clock.now_s()), explanation_key="")
    job.refresh_from_db()
    job.placements.all().delete()
    job_event(job_id=job.pk, from_state=previous, to_state=JobState.CANCELLED, reason=EventReason.CANCELLED, message=reason, actor=user).save()
    audit_record(actor=user, action=AuditAction.JOB_CANCEL, target=job, team=job.queue.team, before={"state": previous},
                 after={"state": job.state}, comment=reason)
    reconcile_after_commit()
    return job
