"""Audit log reads: filtered by who asks, newest first, paginated by keyset (`before` an id)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from scheduling.models import AuditRecord, PreemptionPlan, PreemptionVictim, Role, Team
from scheduling.permissions import can_read_audit, can_read_job_audit, is_admin, restrict_audit, team_ids_of

MAX_PAGE = 200


@dataclass(frozen=True)
class AuditPage:
    records: list[AuditRecord]
    next_before: int | None
    """The `before` of the next (older) page; None on the last page."""


def audit_page(
    *, user, team: str | None = None, action: str | None = None, actor: str | None = None,
    target_type: str | None = None, target_id: str | None = None, before: int | None = None, limit: int = 50,
) -> AuditPage:
    """Up to `limit` (≤ MAX_PAGE) records `user` may read, newest first, with ids below `before` (the previous
    page's last id). Raises PermissionDenied for users who read no audit log (only admins and team leads do)."""
    if not can_read_audit(user):
        raise PermissionDenied("only admins and team leads read the audit log")
    limit = max(1, min(limit, MAX_PAGE))
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
    rows = list(records.order_by("-id")[: limit + 1])
    return AuditPage(rows[:limit], rows[limit - 1].pk if len(rows) > limit else None)


def audit_teams(*, user) -> list[str]:
    """Names of the teams whose records `user` may read: every team for admins, the teams a lead leads."""
    teams = Team.objects.order_by("name").values_list("name", flat=True)
    if not is_admin(user):
        teams = teams.filter(pk__in=team_ids_of(user, role=Role.LEAD))
    return list(teams)


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
