"""Who may do what: the one set of role rules used by services, selectors, the API and the web pages.

Rules: staff users are admins and may do everything. A team's members (researchers and leads)
submit into the team's queues and see the team's jobs in full. A team's lead also edits the
team's queues and quotas (within the team's allotment). Every signed-in user sees every job,
so the queue and the fleet make sense, but jobs of other teams hide their private fields:
the job's name and its owner's username.
"""

from __future__ import annotations

from django.db.models import BooleanField, Case, QuerySet, Value, When

from scheduling.models import Membership, Role


def is_admin(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.is_staff)


def team_ids_of(user, *, role: str | None = None) -> set[int]:
    if not user or not user.is_authenticated:
        return set()
    cache_name = f"_gangway_team_ids_{role or 'any'}"
    cached = getattr(user, cache_name, None)
    if cached is None:
        memberships = Membership.objects.filter(user=user)
        if role:
            memberships = memberships.filter(role=role)
        cached = set(memberships.values_list("team_id", flat=True))
        setattr(user, cache_name, cached)
    return cached


def can_submit_to_team(user, team_id: int) -> bool:
    return is_admin(user) or team_id in team_ids_of(user)


def can_edit_team_queues(user, team_id: int) -> bool:
    return is_admin(user) or team_id in team_ids_of(user, role=Role.LEAD)


def can_cancel_job(user, job) -> bool:
    return is_admin(user) or job.owner_id == user.pk or job.queue.team_id in team_ids_of(user, role=Role.LEAD)


def restrict_jobs(user, jobs: QuerySet) -> QuerySet:
    """Jobs `user` may see, annotated with `is_visible_in_full` (False hides name and owner)."""
    if not user or not user.is_authenticated:
        return jobs.none()
    if is_admin(user):
        return jobs.annotate(is_visible_in_full=Value(True, output_field=BooleanField()))
    return jobs.annotate(
        is_visible_in_full=Case(
            When(queue__team_id__in=team_ids_of(user), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
    )
