"""Team and queue reads, with allotments, quotas, GPUs in use and decayed usage."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Prefetch, QuerySet, Sum

from scheduling.models import Job, Membership, Queue, QueueQuota, Role, Team, TeamAllotment
from scheduling.models.jobs import HOLDING_STATES
from scheduling.permissions import is_admin, team_ids_of


def team_list() -> QuerySet:
    return Team.objects.prefetch_related("allotments__flavor", "queues", "namespaces").order_by("name")


def teams_visible(*, user) -> list[Team]:
    """Teams whose page `user` may open (see permissions.can_view_team): all for admins, their own for members."""
    teams = Team.objects.order_by("name")
    return list(teams if is_admin(user) else teams.filter(pk__in=team_ids_of(user)))


def team_members(*, team: Team) -> list[tuple[str, str]]:
    """(username, role) of the team's members, leads first."""
    rows = Membership.objects.filter(team=team).values_list("user__username", "role")
    return sorted(rows, key=lambda row: (row[1] != Role.LEAD, row[0]))


def allotment_rows(*, queues: list[Queue] | None = None) -> list[dict]:
    """Per team and flavor: the allotment, the nominal quota its queues hold of it, and the GPUs its jobs hold,
    summed from `queues` (every queue, from queue_list; read here when not given)."""
    nominal: dict[tuple, int] = defaultdict(int)
    in_use: dict[tuple, int] = defaultdict(int)
    for queue in queue_list() if queues is None else queues:
        for quota in queue.quotas.all():
            nominal[(queue.team_id, quota.flavor.name)] += quota.nominal
        for flavor, gpus in queue.gpus_in_use.items():
            in_use[(queue.team_id, flavor)] += gpus
    return [
        {"team": a.team.name, "team_id": a.team_id, "flavor": a.flavor.name, "gpus": a.gpus,
         "in_queues": nominal.get((a.team_id, a.flavor.name), 0), "in_use": in_use.get((a.team_id, a.flavor.name), 0)}
        for a in TeamAllotment.objects.select_related("team", "flavor").order_by("team__name", "flavor__name")
    ]


def allotment_get(*, team_name: str, flavor_name: str) -> TeamAllotment:
    """One team's allotment of one flavor (TeamAllotment.DoesNotExist when it has none)."""
    return TeamAllotment.objects.select_related("team", "flavor").get(team__name=team_name, flavor__name=flavor_name)


def team_get(*, name: str) -> Team:
    return team_list().get(name=name)


def _with_usage(queues: list[Queue]) -> list[Queue]:
    """Attach `gpus_in_use` ({flavor: GPUs held by admitted or running jobs}) to each queue, in one query."""
    in_use = defaultdict(dict)
    rows = (
        Job.objects.filter(state__in=HOLDING_STATES, queue__in=queues)
        .values("queue_id", "flavor__name")
        .annotate(gpus=Sum("gpus"))
    )
    for row in rows:
        in_use[row["queue_id"]][row["flavor__name"]] = row["gpus"]
    for queue in queues:
        queue.gpus_in_use = in_use.get(queue.pk, {})
    return queues


def queue_list(*, team: str | None = None) -> list[Queue]:
    queues = (
        Queue.objects.select_related("team", "cohort", "usage")
        .prefetch_related(Prefetch("quotas", queryset=QueueQuota.objects.select_related("flavor").order_by("flavor__name")))
        .order_by("name")
    )
    if team:
        queues = queues.filter(team__name=team)
    return _with_usage(list(queues))


def queue_get(*, name: str) -> Queue:
    queue = (
        Queue.objects.select_related("team", "cohort", "usage")
        .prefetch_related(Prefetch("quotas", queryset=QueueQuota.objects.select_related("flavor").order_by("flavor__name")))
        .get(name=name)
    )
    return _with_usage([queue])[0]
