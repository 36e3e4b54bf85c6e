"""Writes: every change to the scheduling domain goes through one of these keyword-only functions."""

from scheduling.services.cluster import cluster_nodes_sync, cluster_workloads_sync, workload_create
from scheduling.services.fleet import fleet_sync
from scheduling.services.jobs import job_cancel, job_submit
from scheduling.services.org import team_create, team_update
from scheduling.services.nodes import node_cordon
from scheduling.services.preemption import preemption_approve, preemption_reject
from scheduling.services.priority_classes import priority_class_create, priority_class_resolve, priority_class_update
from scheduling.services.queues import queue_create, queue_update
from scheduling.services.reconcile import ReconcileResult, reconcile_pass_run
from scheduling.services.usage import usage_collect

__all__ = [
    "ReconcileResult",
    "reconcile_pass_run",
    "cluster_nodes_sync",
    "cluster_workloads_sync",
    "fleet_sync",
    "job_cancel",
    "job_submit",
    "node_cordon",
    "preemption_approve",
    "preemption_reject",
    "priority_class_create",
    "priority_class_resolve",
    "priority_class_update",
    "queue_create",
    "queue_update",
    "team_create",
    "team_update",
    "usage_collect",
    "workload_create",
]
