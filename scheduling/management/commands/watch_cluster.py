"""`manage.py watch_cluster [--once]`: mirror a Kubernetes cluster's nodes and labelled Jobs into the database."""

from __future__ import annotations

import logging
import threading

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from scheduling.services.cluster import cluster_nodes_sync, cluster_workloads_sync

logger = logging.getLogger("scheduling.cluster")


class Command(BaseCommand):
    help = ("List-then-watch the Kubernetes cluster (KUBECONFIG or in-cluster config): sync GPU nodes into Node rows, "
            "turn labelled suspended Jobs into Gangway jobs, pin released gangs. --once lists, syncs and exits.")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one full list-and-sync, then exit")

    def handle(self, *args, once: bool, **options):
        from scheduling.cluster.kubernetes import ClusterError, ClusterWatcher, KubernetesCluster

        try:
            cluster = KubernetesCluster.from_env()
        except Exception as error:  # noqa: BLE001 - a missing kubeconfig is a configuration error, said plainly
            raise CommandError(f"cannot configure the Kubernetes client: {error}") from error

        def fresh_connection() -> None:
            # The watcher calls back from its flush thread, which keeps its connection between callbacks.
            if threading.current_thread() is not threading.main_thread():
                close_old_connections()

        def on_nodes(nodes) -> None:
            fresh_connection()
            result = cluster_nodes_sync(nodes=nodes, topology=cluster.topology)
            if result.added or result.updated or result.removed:
                self.stdout.write(f"nodes: {len(result.added)} added, {len(result.updated)} updated, {len(result.removed)} removed")

        def on_workloads(workloads) -> None:
            fresh_connection()
            result = cluster_workloads_sync(workloads=workloads, cluster=cluster)
            for label, items in (("discovered jobs", result.created), ("linked jobs", result.linked),
                                 ("rejected workloads", result.rejected), ("cancelled jobs (workload deleted)", result.cancelled)):
                if items:
                    self.stdout.write(f"{label}: {', '.join(map(str, items))}")

        watcher = ClusterWatcher(cluster, on_nodes=on_nodes, on_workloads=on_workloads)
        try:
            if once:
                watcher.run_once()
                self.stdout.write(self.style.SUCCESS(
                    f"synced {len(watcher.objects['nodes'])} nodes and "
                    f"{sum(map(len, watcher.labelled_workloads().values()))} labelled workloads"))
                return
            self.stdout.write("watching the cluster (Ctrl-C stops)")
            watcher.run()
        except ClusterError as error:
            raise CommandError(f"the Kubernetes API refused: {error}") from error
        except KeyboardInterrupt:
            watcher.stop()
