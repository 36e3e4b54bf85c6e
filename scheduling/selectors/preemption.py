"""Preemption plan reads (every signed-in user sees plans; only admins decide)."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from scheduling.models import PreemptionPlan, PreemptionVictim
from scheduling.models.preemption import OPEN_PLAN_STATUSES, PlanStatus

PLAN_VIEWS = {
    "needs-approval": {"status": PlanStatus.PROPOSED, "needs_approval": True},
    "decided": {"status__in": [PlanStatus.APPROVED, PlanStatus.REJECTED, PlanStatus.EXECUTED]},
    "all": {},
}
"""The plan list's filters. Superseded plans (replaced by a newer plan for the same job) appear in none of them."""


def preemption_list(*, status: str | None = None, view: str = "all") -> QuerySet:
    plans = PreemptionPlan.objects.select_related("job__queue__team", "decided_by").prefetch_related(
        # A victim's idle flag (IdleJob, one-to-one) comes in the same join: the admin deciding sees which victims hoard.
        Prefetch("victim_rows", queryset=PreemptionVictim.objects.select_related("job__queue__team", "job__idle").order_by("job_id"))
    )
    if status:
        plans = plans.filter(status=status)
    else:
        plans = plans.exclude(status=PlanStatus.SUPERSEDED).filter(**PLAN_VIEWS[view])
    return plans.order_by("-created_at", "-id")


def open_plan_for_job(*, job_id: int) -> PreemptionPlan | None:
    """The job's plan that is proposed or approved (at most one), for its page to link and to quote its cost."""
    return PreemptionPlan.objects.filter(job_id=job_id, status__in=OPEN_PLAN_STATUSES).first()


def open_plans_taking(*, job_id: int) -> list[PreemptionPlan]:
    """The open plans that would stop `job_id`: for its own page, so the owner of an idle job sees who takes it."""
    return list(PreemptionPlan.objects.filter(victim_rows__job_id=job_id, status__in=OPEN_PLAN_STATUSES).order_by("id"))
