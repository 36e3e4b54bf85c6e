"""The simulated cluster: nodes are the database's Node rows, released gangs run for a deterministic time."""

from __future__ import annotations

import hashlib
from typing import Iterable

from scheduling.cluster.base import Cluster, DiscoveredWorkload, GangRelease, WorkloadPhase, WorkloadRef, WorkloadStatus
from scheduling.core.model import Node, Taint

DEFAULT_DURATION_S = 3600.0


def simulated_duration_s(*, job_id: int, runtime_limit_s: int | None) -> float:
    """How long the job really runs: between 35% and 95% of its limit, fixed per job id (1 h without a limit)."""
    if not runtime_limit_s:
        return DEFAULT_DURATION_S
    digest = hashlib.sha256(f"gangway-job-{job_id}".encode()).digest()
    frac = int.from_bytes(digest[:8], "big") / 2**64
    return runtime_limit_s * (0.35 + 0.6 * frac)


def node_from_row(row) -> Node:
    return Node(
        name=row.name,
        flavor=row.flavor.name,
        capacity_gpus=row.capacity_gpus,
        allocatable_gpus=row.allocatable_gpus,
        labels=dict(row.labels or {}),
        taints=tuple(Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", "NoSchedule")) for t in row.taints or ()),
        is_ready=row.is_ready,
        is_cordoned=row.is_unschedulable,
        external_gpus=row.external_gpus,
    )


def nodes_from_rows() -> list[Node]:
    """Every Node row, by name."""
    from scheduling.models import Node as NodeRow

    return [node_from_row(row) for row in NodeRow.objects.select_related("flavor").order_by("name")]


class SimulatedCluster(Cluster):
    """Every pod of a released gang is ready at once; the gang succeeds after its simulated duration."""

    lists_node_rows = True
    """Its nodes are the Node rows: the reconcile pass may keep them until one changes (snapshot_cache)."""

    def list_nodes(self) -> list[Node]:
        return nodes_from_rows()

    def list_workloads(self) -> list[DiscoveredWorkload]:
        return []

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        from scheduling.models import SimulatedWorkload
        from scheduling.models.jobs import HOLDING_STATES

        job_ids = {ref.job_id for ref in workloads}
        statuses = {job_id: WorkloadStatus(job_id=job_id, phase=WorkloadPhase.MISSING) for job_id in job_ids}
        columns = ("job_id", "generation", "released_at", "duration_s", "pods")
        # The pass asks about every gang holding GPUs: those rows by a join, not an IN list of thousands of ids.
        rows = list(SimulatedWorkload.objects.filter(job__state__in=HOLDING_STATES).values_list(*columns))
        rest = job_ids - {row[0] for row in rows}
        if rest:
            rows += SimulatedWorkload.objects.filter(job_id__in=list(rest)).values_list(*columns)
        for job_id, generation, released_at, duration_s, pods in rows:
            if job_id in job_ids:
                is_done = released_at + duration_s <= now
                statuses[job_id] = WorkloadStatus(job_id=job_id, phase=WorkloadPhase.SUCCEEDED if is_done else WorkloadPhase.RUNNING,
                                                  generation=generation, ready_pods=pods)
        return statuses

    def release(self, release: GangRelease, now: float) -> None:
        from scheduling.models import Job, SimulatedWorkload

        ref = release.workload
        existing = SimulatedWorkload.objects.filter(job_id=ref.job_id).first()
        if existing is not None and existing.generation == ref.generation:
            return
        runtime_limit_s = Job.objects.filter(pk=ref.job_id).values_list("runtime_limit_s", flat=True).first()
        SimulatedWorkload.objects.update_or_create(
            job_id=ref.job_id,
            defaults={
                "generation": ref.generation,
                "released_at": now,
                "duration_s": simulated_duration_s(job_id=ref.job_id, runtime_limit_s=runtime_limit_s),
                "pods": len(release.placement),
                "releases": (existing.releases + 1) if existing is not None else 1,
            },
        )

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        from scheduling.models import SimulatedWorkload

        SimulatedWorkload.objects.filter(job_id=workload.job_id).delete()
