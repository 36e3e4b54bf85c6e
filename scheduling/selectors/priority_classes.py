"""Priority class reads: every signed-in user sees the classes, and which of them their teams may use."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from scheduling.models import PriorityClass, Team


def priority_class_list(*, team: Team | None = None) -> QuerySet:
    """Classes, highest value first; with `team`, only those the team may use."""
    classes = PriorityClass.objects.prefetch_related("teams").order_by("-value", "name")
    if team is not None:
        classes = classes.filter(Q(is_for_all_teams=True) | Q(teams=team)).distinct()
    return classes


def priority_class_get(*, name: str) -> PriorityClass:
    return priority_class_list().get(name=name)
