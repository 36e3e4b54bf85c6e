"""Usage writes: collect one round of GPU use samples (Prometheus/DCGM or simulated) and attribute them to jobs and teams."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from django.conf import settings
from django.db import transaction

from scheduling.models import GpuUsageSample, Job, Placement
from scheduling.models.jobs import HOLDING_STATES
from scheduling.services.common import to_datetime
from scheduling.usage import GpuUsageSample as Sample
from scheduling.usage import PrometheusUsageCollector, simulated_usage

logger = logging.getLogger("scheduling.usage")
UsageSource = Callable[[float, list[tuple[int, str, int]]], list[Sample]]


@dataclass
class UsageCollectResult:
    samples: int = 0
    attributed: int = 0
    pruned: int = 0


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
        for row in Job.objects.filter(state__in=HOLDING_STATES).values("id", "queue__team_id", "cluster_namespace", "cluster_name")
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
    """Store one sample per GPU with its job and team, and drop samples older than GANGWAY_USAGE_RETENTION_S."""
    now = time.time() if now is None else now
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
    pruned, _ = GpuUsageSample.objects.filter(at__lt=to_datetime(now - settings.GANGWAY_USAGE_RETENTION_S)).delete()
    return UsageCollectResult(samples=len(rows), attributed=sum(1 for r in rows if r.job_id is not None), pruned=pruned)
