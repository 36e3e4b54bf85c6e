"""The invariants a crash or a race must never break, checked over the database (and the cluster's view)."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Count, F, Sum

from scheduling import clock
from scheduling.cluster.base import WorkloadPhase, WorkloadRef
from scheduling.core.model import JobState
from scheduling.models import Job, JobEvent, Node, Placement, PodSet, Queue, QueueQuota
from scheduling.models.jobs import HOLDING_STATES


def invariant_violations(*, cluster=None, now: float | None = None) -> list[str]:
    """Every broken invariant as one sentence with the numbers; empty when all hold. With `cluster`, released
    gangs are also compared with what the cluster runs. A committed admission not yet applied is not a
    violation (the next pass heals it); a gang released twice, or released and forgotten, is."""
    return [
        *_nodes_over_committed(),
        *_queues_over_quota(),
        *_incomplete_placements(),
        *_cancelled_but_running(),
        *_placements_without_node(),
        *_generations(),
        *(_cluster_disagrees(cluster, clock.moment(now)) if cluster is not None else ()),
    ]


def _nodes_over_committed() -> list[str]:
    placed = (
        Placement.objects.filter(job__state__in=HOLDING_STATES)
        .values("node__name", "node__allocatable_gpus")
        .annotate(gpus=Sum("gpus"))
        .order_by("node__name")
    )
    return [
        f"node {row['node__name']} is over-committed: {row['gpus']} GPUs placed, {row['node__allocatable_gpus']} allocatable"
        for row in placed
        if row["gpus"] > row["node__allocatable_gpus"]
    ]


def _queues_over_quota() -> list[str]:
    used: dict[tuple[int, int], int] = defaultdict(int)
    for row in Job.objects.filter(state__in=HOLDING_STATES).values("queue_id", "flavor_id").annotate(gpus=Sum("gpus")):
        used[(row["queue_id"], row["flavor_id"])] += row["gpus"]
    quotas = {(q.queue_id, q.flavor_id): q for q in QueueQuota.objects.all()}
    queues = {q.pk: q for q in Queue.objects.select_related("cohort")}
    flavor_names = dict(QueueQuota.objects.values_list("flavor_id", "flavor__name"))
    by_cohort: dict[tuple[int | None, int], list[int]] = defaultdict(list)
    for queue in queues.values():
        for flavor_id in {f for (q, f) in [*quotas, *used] if q == queue.pk}:
            by_cohort[(queue.cohort_id, flavor_id)].append(queue.pk)
    problems = []
    for (queue_id, flavor_id), gpus in sorted(used.items()):
        queue = queues[queue_id]
        quota = quotas.get((queue_id, flavor_id))
        nominal = quota.nominal if quota else 0
        lendable = 0
        if queue.cohort_id is not None:
            for other in by_cohort[(queue.cohort_id, flavor_id)]:
                other_quota = quotas.get((other, flavor_id))
                if other != queue_id and other_quota is not None:
                    lendable += other_quota.nominal if other_quota.lending_limit is None else other_quota.lending_limit
        borrowable = lendable if quota is None or quota.borrowing_limit is None else min(lendable, quota.borrowing_limit)
        if gpus > nominal + borrowable:
            flavor = flavor_names.get(flavor_id, flavor_id)
            problems.append(f"queue {queue.name} is over quota for {flavor}: {gpus} GPUs held, nominal {nominal} + borrowable {borrowable}")
    for (cohort_id, flavor_id), members in sorted(by_cohort.items(), key=lambda item: (item[0][0] or 0, item[0][1])):
        if cohort_id is None:
            continue
        held = sum(used.get((q, flavor_id), 0) for q in members)
        nominal = sum(quotas[(q, flavor_id)].nominal for q in members if (q, flavor_id) in quotas)
        if held > nominal:
            cohort = queues[members[0]].cohort.name
            problems.append(f"cohort {cohort} is over its quota for {flavor_names.get(flavor_id, flavor_id)}: {held} GPUs held, {nominal} nominal in all")
    return problems


def _incomplete_placements() -> list[str]:
    holding = dict(Job.objects.filter(state__in=HOLDING_STATES).values_list("id", "gpus"))
    wanted: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
    for pod_set_id, job_id, count, gpus in PodSet.objects.filter(job_id__in=list(holding)).values_list("id", "job_id", "count", "gpus_per_pod"):
        wanted[job_id][pod_set_id] = (count, gpus)
    placed: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for job_id, pod_set_id, gpus in Placement.objects.filter(job_id__in=list(holding)).values_list("job_id", "pod_set_id", "gpus"):
        placed[job_id][pod_set_id].append(gpus)
    problems = []
    for job_id in sorted(holding):
        pods_wanted = sum(count for count, _ in wanted[job_id].values())
        pods_placed = sum(len(v) for v in placed[job_id].values())
        is_complete = all(
            len(placed[job_id].get(pod_set_id, ())) == count and all(g == gpus for g in placed[job_id].get(pod_set_id, ()))
            for pod_set_id, (count, gpus) in wanted[job_id].items()
        ) and set(placed[job_id]) <= set(wanted[job_id])
        if not is_complete or pods_wanted == 0:
            problems.append(f"job {job_id} holds GPUs without a full placement: {pods_placed} of {pods_wanted} pods placed")
    stale = (
        Placement.objects.exclude(job__state__in=[*HOLDING_STATES, JobState.CANCELLED.value])
        .values("job_id").annotate(pods=Sum("gpus")).order_by("job_id")
    )
    problems.extend(f"job {row['job_id']} holds no GPUs but still has placements" for row in stale)
    return problems


def _cancelled_but_running() -> list[str]:
    """A stop is final: a cancelled job holds no GPUs, and no admission or start is recorded after its cancel."""
    holding = (
        Placement.objects.filter(job__state=JobState.CANCELLED.value)
        .values("job_id").annotate(pods=Count("id")).order_by("job_id")
    )
    problems = [f"job {row['job_id']} was cancelled but holds GPUs: {row['pods']} pods placed" for row in holding]
    ran_after = (
        JobEvent.objects.filter(to_state__in=HOLDING_STATES, job__events__to_state=JobState.CANCELLED.value, job__events__id__lt=F("id"))
        .values_list("job_id", "to_state").distinct().order_by("job_id")
    )
    problems.extend(f"job {job_id} was {state} after its cancel" for job_id, state in ran_after)
    return problems


def _placements_without_node() -> list[str]:
    orphans = Placement.objects.exclude(node_id__in=Node.objects.values("id")).values_list("job_id", "node_id").distinct()
    return [f"job {job_id} has a pod placed on node id {node_id}, which does not exist" for job_id, node_id in orphans]


def _generations() -> list[str]:
    rows = Job.objects.filter(applied_generation__gt=0).values_list("id", "state", "admission_generation", "applied_generation")
    return [
        f"job {job_id} ({state}) records admission {applied} applied, but was only admitted {admitted} times"
        for job_id, state, admitted, applied in rows
        if applied > admitted
    ]


def _cluster_disagrees(cluster, now: float) -> list[str]:
    """Released gangs must run the generation Gangway recorded; stopped jobs must not run at all."""
    jobs = list(
        Job.objects.filter(admission_generation__gt=0).exclude(state__in=["succeeded", "failed"])
        .values("id", "state", "admission_generation", "applied_generation", "cluster_namespace", "cluster_name", "cluster_kind")
    )
    refs = [WorkloadRef(job_id=j["id"], generation=j["applied_generation"], namespace=j["cluster_namespace"], name=j["cluster_name"],
                        kind=j["cluster_kind"]) for j in jobs]
    statuses = cluster.workload_statuses(refs, now) if refs else {}
    problems = []
    for job in jobs:
        status = statuses.get(job["id"])
        if status is None:
            continue
        is_live = status.phase in (WorkloadPhase.STARTING, WorkloadPhase.RUNNING)
        if job["state"] in HOLDING_STATES and job["applied_generation"] and is_live and status.generation not in (0, job["applied_generation"]):
            problems.append(f"job {job['id']}: the cluster runs admission {status.generation}, Gangway applied {job['applied_generation']}")
        if job["state"] not in HOLDING_STATES and job["applied_generation"] == 0 and is_live:
            problems.append(f"job {job['id']} is {job['state']} in Gangway but its gang runs in the cluster (admission {status.generation})")
    return problems
