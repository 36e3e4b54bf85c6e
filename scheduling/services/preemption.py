"""Preemption plan decisions by admins: approve (the next pass executes it if still valid) or reject."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.models import PlanStatus, PreemptionPlan
from scheduling.permissions import is_admin
from scheduling.services.common import reconcile_after_commit


def _decide(*, actor, plan_id: int, status: str) -> PreemptionPlan:
    if not is_admin(actor):
        raise PermissionDenied("only admins decide on preemption plans")
    plan = PreemptionPlan.objects.select_for_update().filter(pk=plan_id).first()
    if plan is None:
        raise PreemptionPlan.DoesNotExist(plan_id)
    if plan.status != PlanStatus.PROPOSED:
        raise ValidationError({"status": [f"plan {plan.pk} is {plan.status}; only a proposed plan can be decided"]})
    plan.status = status
    plan.decided_by = actor
    plan.decided_at = timezone.now()
    plan.save(update_fields=["status", "decided_by", "decided_at"])
    return plan


@transaction.atomic
def preemption_approve(*, actor, plan_id: int) -> PreemptionPlan:
    plan = _decide(actor=actor, plan_id=plan_id, status=PlanStatus.APPROVED)
    reconcile_after_commit()
    return plan


@transaction.atomic
def preemption_reject(*, actor, plan_id: int) -> PreemptionPlan:
    return _decide(actor=actor, plan_id=plan_id, status=PlanStatus.REJECTED)
