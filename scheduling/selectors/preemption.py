"""Preemption plan reads (every signed-in user sees plans; only admins decide)."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from scheduling.models import PreemptionPlan, PreemptionVictim


def preemption_list(*, status: str | None = None) -> QuerySet:
    plans = PreemptionPlan.objects.select_related("job__queue", "decided_by").prefetch_related(
        Prefetch("victim_rows", queryset=PreemptionVictim.objects.select_related("job__queue").order_by("job_id"))
    )
    if status:
        plans = plans.filter(status=status)
    return plans.order_by("-created_at", "-id")
