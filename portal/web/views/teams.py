"""The team pages: the list, a team at a glance with its use over time, and the admins' gaming signals."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse

from portal.web.views.parts import borrowing_charts, idle_gpus_by_queue, job_id_of, usage_charts, window_of
from scheduling import selectors
from scheduling.models import Team
from scheduling.permissions import can_read_audit, can_view_team, is_admin
from scheduling.selectors.glance import queue_glance


@login_required
def team_list(request):
    """The teams the reader may open; a member of one team (not an admin) goes straight to it."""
    teams = selectors.teams_visible(user=request.user)
    if len(teams) == 1 and not is_admin(request.user):
        return redirect("web:team-detail", name=teams[0].name)
    return render(request, "web/team_list.html", {"teams": teams, "allotments": selectors.allotment_rows()})


TEAM_JOBS_PAGE = 20


@login_required
def team_detail(request, name: str):
    """A team at a glance, for its members and admins: its queues, use over time, idle allocations, borrowing, jobs
    and (for its leads and admins) its audit records. The jobs are its live part."""
    team = _visible_team(request.user, name)
    page = selectors.job_page(selectors.job_list(user=request.user, team=name), older_than=job_id_of(request.GET.get("older")),
                              newer_than=job_id_of(request.GET.get("newer")), size=TEAM_JOBS_PAGE)
    context = {"team": team, "page": page, "filters": {}}
    if request.htmx:
        return render(request, "web/_job_table.html", context)
    queues = selectors.queue_list()  # read once for the glances and the allotments
    glances, borrowing_now = queue_glance(user=request.user, team=name, queues=queues)
    idle = [a for a in selectors.idle_allocations(user=request.user) if a.team == name]
    idle_gpus = idle_gpus_by_queue(idle)
    for glance in glances:
        glance.idle_gpus = idle_gpus.get(glance.name, 0)
    audit = selectors.audit_page(user=request.user, team=name, limit=TEAM_JOBS_PAGE).records if can_read_audit(request.user) else None
    context.update({
        "glances": glances, "borrowing_now": borrowing_now, "is_admin": is_admin(request.user),
        "members": selectors.team_members(team=team),
        "allotments": [row for row in selectors.allotment_rows(queues=queues) if row["team"] == name],
        "idle": idle,
        "idle_threshold_percent": settings.GANGWAY_IDLE_THRESHOLD_PERCENT, "idle_grace_s": settings.GANGWAY_IDLE_GRACE_S,
        "usage_charts": _team_usage_charts(name, "1h"), "borrowing": borrowing_charts("1h", name), "audit": audit,
        "signals": selectors.gaming_signals(team=name) if is_admin(request.user) else None, "rules": selectors.GAMING_RULES,
    })
    return render(request, "web/team_detail.html", context)


@login_required
def gaming_signals(request):
    """Admins: every team's gaming signals, each with the rule that acts on it."""
    if not is_admin(request.user):
        raise PermissionDenied("the gaming signals are for admins")
    return render(request, "web/gaming.html", {"signals": selectors.gaming_signals(), "rules": selectors.GAMING_RULES})


def _visible_team(user, name: str) -> Team:
    team = Team.objects.filter(name=name).first()
    if team is None:
        raise Http404("no such team")
    if not can_view_team(user, team.pk):
        raise PermissionDenied(f"team pages are for the team's members and admins; you are not in team {name}")
    return team


def _team_usage_charts(name: str, window: str) -> dict:
    """The team's allocation vs use, then each of its queues' when it has more than one."""
    series = selectors.usage_over_time(by="team", window=window, team=name)
    queues = selectors.usage_over_time(by="queue", window=window, team=name)
    return usage_charts(series + (queues if len(queues) > 1 else []), url=reverse("web:team-usage", args=[name]), window=window)


@login_required
def team_usage(request, name: str):
    """The team page's use-over-time fragment, for another window."""
    _visible_team(request.user, name)
    return render(request, "web/_usage_charts.html", {"charts": _team_usage_charts(name, window_of(request))})
