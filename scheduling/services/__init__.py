"""Writes: every change to the scheduling domain goes through one of these keyword-only functions."""

from scheduling.services.fleet import fleet_sync
from scheduling.services.jobs import job_cancel, job_submit
from scheduling.services.org import team_create, team_update
from scheduling.services.preemption import preemption_approve, preemption_reject
from scheduling.services.queues import queue_create, queue_update
from scheduling.services.reconcile import ReconcileResult, admission_cycle_run

__all__ = [
    "ReconcileResult",
    "admission_cycle_run",
    "fleet_sync",
    "job_cancel",
    "job_submit",
    "preemption_approve",
    "preemption_reject",
    "queue_create",
    "queue_update",
    "team_create",
    "team_update",
]
