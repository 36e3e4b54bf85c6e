"""Persistence of the scheduling domain; states and reasons come from scheduling.core enums."""

from scheduling.models.audit import AuditAction, AuditRecord
from scheduling.models.fleet import FleetSettings, Node, ReconcileState, RowChange
from scheduling.models.jobs import EventReason, Explanation, HistoryDay, Job, JobEvent, PodSet, Placement, SubmissionHour, SubmissionTally
from scheduling.models.org import Flavor, Membership, Role, Team, TeamAllotment, TeamNamespace
from scheduling.models.preemption import PlanStatus, PreemptionPlan, PreemptionVictim
from scheduling.models.priority import PriorityClass
from scheduling.models.queues import Cohort, Queue, QueueQuota, QueueUsage
from scheduling.models.simulated import SimulatedWorkload
from scheduling.models.usage import GpuUsageSample, IdleJob, QueueUsageRollup, UsageRollup, WorkloadRejection

__all__ = [
    "AuditAction",
    "AuditRecord",
    "Cohort",
    "Explanation",
    "FleetSettings",
    "GpuUsageSample",
    "HistoryDay",
    "IdleJob",
    "Flavor",
    "Job",
    "EventReason",
    "JobEvent",
    "Membership",
    "Node",
    "Placement",
    "PlanStatus",
    "PodSet",
    "PreemptionPlan",
    "PriorityClass",
    "PreemptionVictim",
    "Queue",
    "QueueQuota",
    "QueueUsage",
    "QueueUsageRollup",
    "ReconcileState",
    "Role",
    "RowChange",
    "SimulatedWorkload",
    "SubmissionHour",
    "SubmissionTally",
    "Team",
    "TeamAllotment",
    "TeamNamespace",
    "UsageRollup",
    "WorkloadRejection",
]
