"""Picks the cluster adapter named by settings.GANGWAY_CLUSTER."""

from __future__ import annotations

from django.conf import settings

from scheduling.cluster.base import Cluster


class RecordedNodes:
    """The nodes as the database records them (loaded from the fleet file, or kept in sync by the
    watcher): all a snapshot reads, with no connection to the cluster, so the processes that only
    explain and preview (the web) need no cluster credentials."""

    lists_node_rows = True
    """The reconcile pass may keep the nodes until a row changes (snapshot_cache; the watcher writes the rows)."""

    def list_nodes(self):
        from scheduling.cluster.simulated import node_from_row
        from scheduling.models import Node as NodeRow

        return [node_from_row(row) for row in NodeRow.objects.select_related("flavor").order_by("name")]


class WatchedCluster(RecordedNodes):
    """A Kubernetes cluster whose nodes are read from the Node rows the watcher keeps in sync, so a
    reconcile pass reads a snapshot instead of listing 1,250 nodes and every pod from the API.
    Everything else (statuses, release, suspend, pinning, creation) goes to the adapter."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster

    def __getattr__(self, name: str):
        return getattr(self.cluster, name)


def get_cluster() -> Cluster:
    name = getattr(settings, "GANGWAY_CLUSTER", "simulated")
    if name == "simulated":
        from scheduling.cluster.simulated import SimulatedCluster

        return SimulatedCluster()
    if name == "kubernetes":
        from scheduling.cluster.kubernetes import KubernetesCluster

        return WatchedCluster(KubernetesCluster.from_env())
    raise ValueError(f"unknown GANGWAY_CLUSTER {name!r}: expected 'simulated' or 'kubernetes'")
