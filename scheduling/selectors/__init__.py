"""Reads for the API and the web pages, filtered by who is asking (see scheduling.permissions)."""

from scheduling.selectors.audit import audit_actors, audit_for_job, audit_page, audit_teams
from scheduling.selectors.fleet import fleet_summary, node_list, scheduling_policy
from scheduling.selectors.gaming import RULES as GAMING_RULES
from scheduling.selectors.gaming import gaming_signals
from scheduling.selectors.jobs import job_get, job_list, job_page, job_submitted
from scheduling.selectors.org import allotment_get, allotment_rows, queue_get, queue_list, team_get, team_list, team_members, teams_visible
from scheduling.selectors.preemption import preemption_list
from scheduling.selectors.priority_classes import priority_class_get, priority_class_list, priority_classes_usable_by
from scheduling.selectors.usage import idle_allocations, job_usage_over_time, usage_over_time, usage_report

__all__ = [
    "audit_actors",
    "audit_for_job",
    "audit_page",
    "audit_teams",
    "fleet_summary",
    "gaming_signals",
    "GAMING_RULES",
    "scheduling_policy",
    "job_get",
    "job_list",
    "job_page",
    "job_submitted",
    "node_list",
    "preemption_list",
    "priority_class_get",
    "priority_class_list",
    "priority_classes_usable_by",
    "queue_get",
    "queue_list",
    "team_get",
    "team_list",
    "team_members",
    "teams_visible",
    "allotment_get",
    "allotment_rows",
    "usage_report",
    "usage_over_time",
    "job_usage_over_time",
    "idle_allocations",
]
