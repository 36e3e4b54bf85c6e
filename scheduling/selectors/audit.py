"""Audit log reads: filtered by who asks, newest first, paginated by keyset (`before` an id)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from scheduling.models import AuditRecord, PreemptionPlan, PreemptionVictim
from scheduling.permissions import can_read_job_audit, restrict_audit

MAX_PAGE = 200


def audit_list(
    *, user, team: str | None = None, action: str | None = None, actor: str | None = None,
    target_type: str | None = None, target_id: str | None = None, before: int | None = None, limit: int = 50,
) -> list[AuditRecord]:
    """Up to `limit` records `user` may read, newest first, with ids below `before` (the previous page's last id)."""
    records = restrict_audit(user, AuditRecord.objects.select_related("team"))
    if team:
        records = records.filter(team__name=team)
    if action:
        records = records.filter(action=action)
    if actor:
        records = records.filter(actor_name=actor)
    if target_type:
        records = records.filter(target_type=target_type)
    if target_id:
        records = records.filter(target_id=target_id)
    if before is not None:
        records = records.filter(id__lt=before)
    return list(records.order_by("-id")[: max(1, min(limit, MAX_PAGE))])


def audit_for_job(*, user, job, limit: int = 50) -> list[AuditRecord] | None:
    """Records about `job`: its cancellation, and decisions on preemption plans it asked for or fell victim to.
    None when `user` may not read them."""
    if not can_read_job_audit(user, job):
        return None
    plan_ids = [str(pk) for pk in PreemptionPlan.objects.filter(
        Q(job=job) | Q(pk__in=PreemptionVictim.objects.filter(job=job).values("plan_id"))
    ).values_list("pk", flat=True)]
    about_job = Q(target_type="job", target_id=str(job.pk)) | Q(target_type="preemptionplan", target_id__in=plan_ids)
    return list(AuditRecord.objects.select_related("team").filter(about_job).order_by("-id")[:limit])


def audit_actors(*, user) -> list[str]:
    """The actor filter's choices: who appears in the records `user` may read."""
    records = restrict_audit(user, AuditRecord.objects.all())
    return list(records.order_by("actor_name").values_list("actor_name", flat=True).distinct())
