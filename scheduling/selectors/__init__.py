"""Reads for the API and the web pages, filtered by who is asking (see scheduling.permissions)."""

from scheduling.selectors.fleet import fleet_summary, node_list
from scheduling.selectors.jobs import job_get, job_list, job_page
from scheduling.selectors.org import allotment_rows, queue_get, queue_list, team_get, team_list
from scheduling.selectors.preemption import preemption_list
from scheduling.selectors.usage import idle_allocations, job_usage_over_time, usage_over_time, usage_report

__all__ = [
    "fleet_summary",
    "job_get",
    "job_list",
    "job_page",
    "node_list",
    "preemption_list",
    "queue_get",
    "queue_list",
    "team_get",
    "team_list",
    "allotment_rows",
    "usage_report",
    "usage_over_time",
    "job_usage_over_time",
    "idle_allocations",
]
