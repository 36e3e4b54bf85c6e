"""Picks the cluster adapter named by settings.GANGWAY_CLUSTER."""

from __future__ import annotations

from django.conf import settings

from scheduling.cluster.base import Cluster


def get_cluster() -> Cluster:
    name = getattr(settings, "GANGWAY_CLUSTER", "simulated")
    if name == "simulated":
        from scheduling.cluster.simulated import SimulatedCluster

        return SimulatedCluster()
    if name == "kubernetes":
        from scheduling.cluster.kubernetes import KubernetesCluster

        return KubernetesCluster()
    raise ValueError(f"unknown GANGWAY_CLUSTER {name!r}: expected 'simulated' or 'kubernetes'")
