"""Picks the cluster adapter named by settings.GANGWAY_CLUSTER."""

from __future__ import annotations

from typing import Iterable, Mapping

from django.conf import settings

from scheduling.cluster.base import (
    Cluster, DiscoveredWorkload, GangRelease, NodeSource, WorkloadRef, WorkloadSpec, WorkloadStatus,
)


class RecordedNodes(NodeSource):
    """The nodes as the database records them (loaded from the fleet file, or kept in sync by the
    watcher): all a snapshot reads, with no connection to the cluster, so the processes that only
    explain and preview (the web) need no cluster credentials."""

    lists_node_rows = True
    """The reconcile pass may keep the nodes until a row changes (snapshot_cache; the watcher writes the rows)."""

    def list_nodes(self):
        from scheduling.cluster.simulated import nodes_from_rows

        return nodes_from_rows()


class WatchedCluster(RecordedNodes, Cluster):
    """A Kubernetes cluster whose nodes are read from the Node rows the watcher keeps in sync, so a
    reconcile pass reads a snapshot instead of listing 1,250 nodes and every pod from the API.
    Everything else (statuses, release, suspend, pinning, creation) goes to the adapter."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.creates_workloads = cluster.creates_workloads

    def list_workloads(self) -> list[DiscoveredWorkload]:
        return self.cluster.list_workloads()

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        return self.cluster.workload_statuses(workloads, now)

    def release(self, release: GangRelease, now: float) -> None:
        self.cluster.release(release, now)

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        self.cluster.suspend(workload, now)

    def create_workload(self, *, namespace: str, name: str, spec: WorkloadSpec, pod_template: Mapping,
                        job_id: int | None = None) -> WorkloadRef:
        return self.cluster.create_workload(namespace=namespace, name=name, spec=spec, pod_template=pod_template, job_id=job_id)

    def pin_released_gangs(self) -> int:
        return self.cluster.pin_released_gangs()


def get_cluster() -> Cluster:
    name = getattr(settings, "GANGWAY_CLUSTER", "simulated")
    if name == "simulated":
        from scheduling.cluster.simulated import SimulatedCluster

        return SimulatedCluster()
    if name == "kubernetes":
        from scheduling.cluster.kubernetes import KubernetesCluster

        return WatchedCluster(KubernetesCluster.from_env())
    raise ValueError(f"unknown GANGWAY_CLUSTER {name!r}: expected 'simulated' or 'kubernetes'")
