"""Who may do what: the one set of role rules used by services, selectors, the API and the web pages.

Rules: staff users are admins and may do everything. A team's members (researchers and leads)
submit into the team's queues and see the team's jobs in full. A team's lead also edits the
team's queues and quotas (within the team's allotment). Every signed-in user sees every job,
so the queue and the fleet make sense, but jobs of other teams hide their private fields:
the job's name, its owner's username and the people named on its events.
The audit log is for admins (all of it) and leads (their teams' records and their jobs' records).
"""

from __future__ import annotations

from django.db.models import BooleanField, Case, QuerySet, Value, When

from scheduling.models import Membership, Role


def is_admin(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.is_staff)


def team_ids_of(user, *, role: str | None = None) -> set[int]:
    """The teams `user` belongs to (with `role`, only those); one query per request, whichever roles are asked."""
    if not user or not user.is_authenticated:
        return set()
    memberships = getattr(user, "_gangway_memberships", None)
    if memberships is None:
        memberships = user._gangway_memberships = list(Membership.objects.filter(user=user).values_list("team_id", "role"))
    return {team_id for team_id, team_role in memberships if role is None or team_role == role}


def can_submit_to_team(user, team_id: int) -> bool:
    return is_admin(user) or team_id in team_ids_of(user)


def can_edit_team_queues(user, team_id: int) -> bool:
    return is_admin(user) or team_id in team_ids_of(user, role=Role.LEAD)


def can_view_team(user, team_id: int) -> bool:
    """A team's page (its jobs in full, its idle allocations, its records) is for its members and admins."""
    return is_admin(user) or team_id in team_ids_of(user)


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


def restrict_event_actors(user, job) -> None:
    """Mark each prefetched event of `job` with the actor `user` may see: `actor_username` (None for the
    reconciler or when hidden) and `is_actor_private`. Jobs not visible in full hide who acted on them."""
    for event in job.events.all():
        event.is_actor_private = event.actor_id is not None and not job.is_visible_in_full
        event.actor_username = event.actor.username if event.actor_id is not None and not event.is_actor_private else None


def can_read_audit(user) -> bool:
    return is_admin(user) or bool(team_ids_of(user, role=Role.LEAD))


def restrict_audit(user, records: QuerySet) -> QuerySet:
    """Audit records `user` may read: admins all, leads their teams', everyone else none."""
    if is_admin(user):
        return records
    return records.filter(team_id__in=team_ids_of(user, role=Role.LEAD))


def can_read_job_audit(user, job) -> bool:
    """Admins and the leads of the job's team read every record about the job, whichever team made it."""
    return is_admin(user) or job.queue.team_id in team_ids_of(user, role=Role.LEAD)
