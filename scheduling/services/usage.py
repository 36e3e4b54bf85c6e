"""Usage writes: collect one round of GPU use samples (Prometheus/DCGM or simulated), attribute them to jobs and teams,
keep allocation vs use as per-minute rollups per job and per queue, compacted to hours after a day, and record which
jobs hold GPUs they do not use (idle allocations)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable, Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.db.models.functions import TruncHour

from scheduling import clock
from scheduling.models import GpuUsageSample, IdleJob, Job, Placement, QueueUsageRollup, UsageRollup
from scheduling.models.jobs import HOLDING_STATES
from scheduling.services.common import to_datetime
from scheduling.usage import GpuUsageSample as Sample
from scheduling.usage import PrometheusUsageCollector, simulated_usage
from scheduling.usage.rollup import job_uses, use_percent

logger = logging.getLogger("scheduling.usage")
UsageSource = Callable[[float, list[tuple[int, str, int]]], list[Sample]]
MINUTE_S = 60
HOUR_S = 3600
MINUTE_ROLLUPS_KEPT_S = 26 * HOUR_S
"""Minute rollups serve the 1 h and 24 h charts; older ones are compacted into hours (the 7 d chart)."""


@dataclass
class UsageCollectResult:
    samples: int = 0
    attributed: int = 0
    pruned: int = 0
    rollups: int = 0
    compacted: int = 0


def usage_source() -> UsageSource:
    """Prometheus when GANGWAY_PROMETHEUS_URL is set; else simulated use on the simulated cluster, and nothing
    on a real cluster (made-up numbers about real GPUs would mislead)."""
    if settings.GANGWAY_PROMETHEUS_URL:
        collector = PrometheusUsageCollector.from_env({**os.environ, "GANGWAY_PROMETHEUS_URL": settings.GANGWAY_PROMETHEUS_URL})
        return lambda at, allocations: collector.collect(at)
    if settings.GANGWAY_CLUSTER == "simulated":
        return lambda at, allocations: simulated_usage(allocations, at=at)
    logger.info("usage: GANGWAY_PROMETHEUS_URL is not set; no GPU use is collected on a %s cluster", settings.GANGWAY_CLUSTER)
    return lambda at, allocations: []


def _allocations() -> tuple[list[tuple[int, str, int]], dict[int, dict]]:
    """(job id, node, GPUs) per node of every job holding GPUs, and those jobs' team and workload names."""
    per_node: dict[tuple[int, str], int] = {}
    for job_id, node, gpus in Placement.objects.filter(job__state__in=HOLDING_STATES).values_list("job_id", "node__name", "gpus"):
        per_node[(job_id, node)] = per_node.get((job_id, node), 0) + gpus
    jobs = {
        row["id"]: row
        for row in Job.objects.filter(state__in=HOLDING_STATES).values("id", "queue__team_id", "queue_id", "flavor_id", "cluster_namespace", "cluster_name")
    }
    return [(job_id, node, gpus) for (job_id, node), gpus in sorted(per_node.items())], jobs


def _attribute(sample: Sample, jobs: dict[int, dict], by_pod_prefix: dict[str, list[tuple[str, int]]], alone_on_node: dict[str, int]) -> int | None:
    """The job a sample belongs to: given by the simulated source; else its pod's Job (pods are named
    `<job>-<index>-<suffix>` by the Job controller); else the only Gangway job placed on its node."""
    if sample.job_id is not None:
        return sample.job_id if sample.job_id in jobs else None
    if sample.pod:
        for prefix, job_id in by_pod_prefix.get(sample.namespace or "", ()):
            if sample.pod.startswith(prefix):
                return job_id
        return None  # a pod Gangway does not manage
    return alone_on_node.get(sample.node)


@transaction.atomic
def usage_collect(*, now: float | None = None, source: UsageSource | None = None) -> UsageCollectResult:
    """Store one sample per GPU with its job and team, add this round to the jobs' minute rollups, compact
    minute rollups older than a day into hours, and drop raw samples older than GANGWAY_USAGE_RAW_RETENTION_S
    and rollups older than GANGWAY_USAGE_RETENTION_S."""
    now = clock.moment(now)
    source = source or usage_source()
    allocations, jobs = _allocations()
    samples: Iterable[Sample] = source(now, allocations)
    by_pod_prefix: dict[str, list[tuple[str, int]]] = {}
    for job_id, row in jobs.items():
        if row["cluster_name"]:
            by_pod_prefix.setdefault(row["cluster_namespace"], []).append((f"{row['cluster_name']}-", job_id))
    for prefixes in by_pod_prefix.values():
        prefixes.sort(key=lambda item: -len(item[0]))  # the longest name wins: "train-1-" before "train-"
    nodes_of: dict[str, set[int]] = {}
    for job_id, node, _ in allocations:
        nodes_of.setdefault(node, set()).add(job_id)
    alone_on_node = {node: next(iter(ids)) for node, ids in nodes_of.items() if len(ids) == 1}
    moment = to_datetime(now)
    rows = []
    for sample in samples:
        job_id = _attribute(sample, jobs, by_pod_prefix, alone_on_node)
        rows.append(GpuUsageSample(
            at=moment, node_name=sample.node, gpu=sample.gpu, job_id=job_id,
            team_id=jobs[job_id]["queue__team_id"] if job_id is not None else None,
            util_percent=sample.util_percent, fb_used_mib=sample.fb_used_mib,
        ))
    GpuUsageSample.objects.bulk_create(rows, batch_size=2000)
    rollups = _rollups_add(now=now, allocations=allocations, jobs=jobs, samples=rows)
    compacted = _rollups_compact(now=now)
    pruned, _ = GpuUsageSample.objects.filter(at__lt=to_datetime(now - settings.GANGWAY_USAGE_RAW_RETENTION_S)).delete()
    for model in (UsageRollup, QueueUsageRollup):
        model.objects.filter(start__lt=to_datetime(now - settings.GANGWAY_USAGE_RETENTION_S)).delete()
    idle_jobs_record(now=now)
    return UsageCollectResult(samples=len(rows), attributed=sum(1 for r in rows if r.job_id is not None), pruned=pruned,
                              rollups=rollups, compacted=compacted)


def _rollups_add(*, now: float, allocations, jobs: dict[int, dict], samples: list[GpuUsageSample]) -> int:
    """This round counts for one collection period (GANGWAY_USAGE_INTERVAL_S) of each held job, in the minute
    that holds `now`. Two rounds in one minute make two rows; readers sum them."""
    held: dict[int, int] = {}
    for job_id, _, gpus in allocations:
        held[job_id] = held.get(job_id, 0) + gpus
    utils: dict[int, list[float]] = {}
    for sample in samples:
        if sample.job_id is not None:
            utils.setdefault(sample.job_id, []).append(sample.util_percent)
    period_s = settings.GANGWAY_USAGE_INTERVAL_S
    start = to_datetime(now - now % MINUTE_S)
    rollups = [
        UsageRollup(
            start=start, bucket_s=MINUTE_S, job_id=use.job_id, team_id=jobs[use.job_id]["queue__team_id"],
            queue_id=jobs[use.job_id]["queue_id"], flavor_id=jobs[use.job_id]["flavor_id"],
            allocated_gpu_s=use.allocated_gpus * period_s, used_gpu_s=use.used_gpus * period_s,
        )
        for use in job_uses(held, utils) if use.job_id in jobs
    ]
    UsageRollup.objects.bulk_create(rollups, batch_size=2000)
    QueueUsageRollup.objects.bulk_create(_per_queue(rollups, lambda row: (row.start, row.bucket_s, row.team_id, row.queue_id, row.flavor_id)))
    return len(rollups)


def _per_queue(rollups, key) -> list[QueueUsageRollup]:
    """Job rollups summed per (start, bucket, team, queue, flavor) as `key` reads them from a row."""
    sums: dict[tuple, list[float]] = {}
    for row in rollups:
        total = sums.setdefault(key(row), [0.0, 0.0])
        total[0] += row.allocated_gpu_s
        total[1] += row.used_gpu_s
    return [QueueUsageRollup(start=start, bucket_s=bucket_s, team_id=team, queue_id=queue, flavor_id=flavor,
                             allocated_gpu_s=allocated, used_gpu_s=used)
            for (start, bucket_s, team, queue, flavor), (allocated, used) in sums.items()]


def _rollups_compact(*, now: float) -> int:
    """Minute rows of whole hours older than a day become one row per job and hour. Returns the minute rows merged."""
    cutoff_s = now - MINUTE_ROLLUPS_KEPT_S
    old = UsageRollup.objects.filter(bucket_s=MINUTE_S, start__lt=to_datetime(cutoff_s - cutoff_s % HOUR_S))
    if not old.exists():
        return 0
    hours = (
        old.annotate(hour=TruncHour("start")).values("hour", "job_id", "team_id", "queue_id", "flavor_id")
        .annotate(allocated=Sum("allocated_gpu_s"), used=Sum("used_gpu_s")).order_by()
    )
    hourly = [
        UsageRollup(start=row["hour"], bucket_s=HOUR_S, job_id=row["job_id"], team_id=row["team_id"], queue_id=row["queue_id"],
                    flavor_id=row["flavor_id"], allocated_gpu_s=row["allocated"], used_gpu_s=row["used"])
        for row in hours
    ]
    UsageRollup.objects.bulk_create(hourly, batch_size=2000)
    QueueUsageRollup.objects.filter(bucket_s=MINUTE_S, start__lt=to_datetime(cutoff_s - cutoff_s % HOUR_S)).delete()
    QueueUsageRollup.objects.bulk_create(_per_queue(hourly, lambda row: (row.start, HOUR_S, row.team_id, row.queue_id, row.flavor_id)))
    merged, _ = old.delete()
    return merged


def idle_jobs_record(*, now: float) -> None:
    """Replace the idle allocations: jobs holding GPUs since before the grace period whose use over the whole grace
    period is below the threshold (GANGWAY_IDLE_GRACE_S, GANGWAY_IDLE_THRESHOLD_PERCENT)."""
    grace_s, threshold = settings.GANGWAY_IDLE_GRACE_S, settings.GANGWAY_IDLE_THRESHOLD_PERCENT
    held = Job.objects.filter(state__in=HOLDING_STATES, admitted_at__lte=to_datetime(now - grace_s))
    # The minute bucket the grace period starts in overlaps it, so it counts: the mean covers the whole grace period,
    # and a grace period of a minute or two always holds a bucket before this collection's.
    per_job = (
        UsageRollup.objects.filter(start__gt=to_datetime(now - grace_s - MINUTE_S), start__lte=to_datetime(now), job__in=held)
        .values("job_id").annotate(allocated=Sum("allocated_gpu_s"), used=Sum("used_gpu_s")).order_by()
    )
    # A job found idle before keeps its start; a newly found one has been idle since the grace period began.
    known_since = dict(IdleJob.objects.values_list("job_id", "since"))
    idle = []
    for row in per_job:
        util = use_percent(row["used"], row["allocated"])
        if util is not None and util < threshold:
            since = known_since.get(row["job_id"]) or to_datetime(now - grace_s)
            idle.append(IdleJob(job_id=row["job_id"], mean_util_percent=util, since=since))
    IdleJob.objects.all().delete()
    IdleJob.objects.bulk_create(idle)
