"""Preemption plan decisions by admins: approve (the next pass executes it if still valid) or reject."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduling import clock
from scheduling.models import AuditAction, PlanStatus, PreemptionPlan
from scheduling.permissions import is_admin
from scheduling.services.audit import audit_record
from scheduling.services.common import comment_check, reconcile_after_commit


DECISION_ACTIONS = {PlanStatus.APPROVED: AuditAction.PREEMPTION_APPROVE, PlanStatus.REJECTED: AuditAction.PREEMPTION_REJECT}


def _decide(*, actor, plan_id: int, status: str, comment: str) -> PreemptionPlan:
    if not is_admin(actor):
        raise PermissionDenied("only admins decide on preemption plans")
    comment_check(comment)
    plan = PreemptionPlan.objects.select_for_update().filter(pk=plan_id).first()
    if plan is None:
        raise PreemptionPlan.DoesNotExist(plan_id)
    if plan.status != PlanStatus.PROPOSED:
        raise ValidationError({"status": [f"plan {plan.pk} is {plan.status}; only a proposed plan can be decided"]})
    plan.status = status
    plan.decided_by = actor
    plan.decided_at = clock.now_datetime()
    plan.save(update_fields=["status", "decided_by", "decided_at"])
    audit_record(actor=actor, action=DECISION_ACTIONS[status], target=plan, team=plan.job.queue.team, before={"status": PlanStatus.PROPOSED.value},
                 after={"status": status, "job": plan.job_id, "victims": sorted(plan.victims.values_list("pk", flat=True))}, comment=comment)
    return plan


@transaction.atomic
def preemption_approve(*, actor, plan_id: int, comment: str = "") -> PreemptionPlan:
    plan = _decide(actor=actor, plan_id=plan_id, status=PlanStatus.APPROVED, comment=comment)
    reconcile_after_commit()
    return plan


@transaction.atomic
def preemption_reject(*, actor, plan_id: int, comment: str = "") -> PreemptionPlan:
    return _decide(actor=actor, plan_id=plan_id, status=PlanStatus.REJECTED, comment=comment)
