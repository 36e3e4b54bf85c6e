"""Priority class reads: every signed-in user sees the classes, and which of them their teams may use."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from scheduling.models import PriorityClass, Team
from scheduling.permissions import is_admin, team_ids_of


def priority_class_list(*, team: Team | None = None) -> QuerySet:
    """Classes, highest value first; with `team`, only those the team may use."""
    classes = PriorityClass.objects.prefetch_related("teams").order_by("-value", "name")
    if team is not None:
        classes = classes.filter(Q(is_for_all_teams=True) | Q(teams=team)).distinct()
    return classes


def priority_classes_usable_by(*, user) -> list[PriorityClass]:
    """The classes `user` may submit at, highest first: every class for admins, else those open to all teams or to
    one of the user's teams."""
    classes = priority_class_list()
    if is_admin(user):
        return list(classes)
    return list(classes.filter(Q(is_for_all_teams=True) | Q(teams__in=team_ids_of(user))).distinct())


def priority_class_get(*, name: str) -> PriorityClass:
    return priority_class_list().get(name=name)
