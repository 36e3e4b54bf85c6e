"""Server-rendered pages: jobs (list, submit, detail), fleet, teams, preemption plans, history and the audit log (the
queues page and its change forms: portal.web.queues)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F, Sum
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.web.forms import JobSubmitForm, filled_rows, pod_set_formset
from scheduling import selectors, services
from scheduling.core.model import JobState
from scheduling.models import AuditAction, FleetSettings, Flavor, Job, PreemptionPlan, Queue, Team
from scheduling.permissions import can_cancel_job, can_read_audit, can_view_team, is_admin, team_ids_of
from scheduling.selectors.borrowing import borrowing_over_time
from scheduling.selectors.glance import queue_glance
from scheduling.selectors.history import queue_history
from scheduling.selectors.preemption import PLAN_VIEWS, open_plan_for_job
from scheduling.selectors.usage import GROUPINGS, WINDOWS
from scheduling.selectors.explanations import job_explanation_get


@login_required
def job_list(request):
    filters = {key: request.GET.get(key) or None for key in ("queue", "team", "state", "owner")}
    if filters["state"] and filters["state"] not in {s.value for s in JobState}:
        filters["state"] = None
    page = selectors.job_page(selectors.job_list(user=request.user, **filters), older_than=_job_id(request.GET.get("older")),
                              newer_than=_job_id(request.GET.get("newer")))
    idle = selectors.idle_allocations(user=request.user)
    context = {"page": page, "filters": filters, "idle_job_ids": {a.job_id for a in idle}}
    if request.htmx:
        return render(request, "web/_job_table.html", context)
    queues = selectors.queue_list()
    return render(request, "web/job_list.html", {
        **context, "states": [s.value for s in JobState], "queues": [queue.name for queue in queues],
        "overview": _overview(request.user, idle, queues),
    })


def _overview(user, idle, queues) -> dict:
    """The first screen's line of what needs attention: the reader's teams' GPUs against their allotments (admins:
    the teams borrowing beyond theirs; summed from `queues`), idle allocations, and (admins) plans waiting for a decision."""
    own = team_ids_of(user)
    allotments = selectors.allotment_rows(queues=queues)
    overview = {
        "idle_gpus": sum(a.gpus for a in idle), "idle_count": len(idle),
        "own": [row for row in allotments if row["team_id"] in own],
        "borrowing": [row for row in allotments if row["in_use"] > row["gpus"]],
    }
    if is_admin(user):
        overview["plans_waiting"] = selectors.preemption_list(view="needs-approval").count()
    return overview


def _job_id(raw: str | None) -> int | None:
    """A pager link's job id; anything else starts from the newest job."""
    return int(raw) if raw and raw.isdigit() else None


@login_required
def job_submit(request):
    allowed = Queue.objects.order_by("name")
    if not is_admin(request.user):
        allowed = allowed.filter(team_id__in=team_ids_of(request.user))
    form_kwargs = {
        "queues": list(allowed.values_list("name", flat=True)),
        # The flavor with the most GPUs first: it is the default choice.
        "flavors": list(Flavor.objects.annotate(fleet_gpus=Sum("nodes__capacity_gpus")).order_by(F("fleet_gpus").desc(nulls_last=True), "name")
                        .values_list("name", flat=True)),
        "levels": list(FleetSettings.load().topology_levels),
        "priority_classes": _priority_class_choices(request.user),
        "may_set_priority": is_admin(request.user),
    }
    form = JobSubmitForm(request.POST or None, **form_kwargs)
    pod_sets = pod_set_formset(request.POST or None)
    if request.method == "POST" and form.is_valid() and pod_sets.is_valid():
        data = form.cleaned_data
        try:
            job = services.job_submit(
                user=request.user,
                queue_name=data["queue"],
                flavor_name=data["flavor"],
                name=data["name"],
                pod_sets=[row.cleaned_data for row in filled_rows(pod_sets)],
                priority_class=data["priority_class"] or None,
                priority=data.get("priority"),
                topology_required=data["topology_required"] or None,
                topology_preferred=data["topology_preferred"] or None,
                runtime_limit_s=data["runtime_limit_s"],
                checkpoint_interval_s=data["checkpoint_interval_s"],
                is_preemptible=data["preemptible"],
            )
        except ValidationError as error:
            form.add_service_errors(error.message_dict, pod_sets)
        except PermissionDenied as error:
            form.add_error("queue", str(error))
        else:
            messages.success(request, f"Job #{job.pk} submitted.")
            return redirect("web:job-detail", pk=job.pk)
    failed = request.method == "POST" and form.errors_anywhere(pod_sets)
    return render(request, "web/job_submit.html", {"form": form, "pod_sets": pod_sets}, status=400 if failed else 200)


def _priority_class_choices(user) -> list[tuple[str, str]]:
    """The classes `user` may choose (admins: all), labelled with their value and cap."""
    classes = selectors.priority_classes_usable_by(user=user)
    return [(pc.name, f"{pc.name} ({pc.value}{f', ≤ {pc.max_gpus_per_team} GPUs per team' if pc.max_gpus_per_team is not None else ''})")
            for pc in classes]


@login_required
def job_detail(request, pk: int):
    try:
        job = selectors.job_get(user=request.user, job_id=pk)
    except Job.DoesNotExist as error:
        raise Http404("no such job") from error
    is_final = JobState(job.state).is_final
    idle = {a.job_id: a for a in selectors.idle_allocations(user=request.user)}.get(job.pk) if not is_final else None
    context = {
        "job": job, "is_final": is_final, "explanation": job_explanation_get(job=job), "idle": idle,
        "idle_grace_s": settings.GANGWAY_IDLE_GRACE_S, "can_cancel": not is_final and can_cancel_job(request.user, job),
        "audit": selectors.audit_for_job(user=request.user, job=job),
        "open_plan": open_plan_for_job(job_id=job.pk) if job.state == JobState.PENDING else None,
    }
    if request.htmx:
        return render(request, "web/_job_live.html", context)
    context["usage_charts"] = _job_usage_charts(job.pk, "1h")
    return render(request, "web/job_detail.html", context)


def _window(request) -> str:
    window = request.GET.get("window", "1h")
    return window if window in WINDOWS else "1h"


def _charts(series: list, *, url: str, window: str, by: str | None = None) -> dict:
    for index, one in enumerate(series):
        one.chart_id = f"usage-{by or 'job'}-{index}"
    return {"series": series, "url": url, "window": window, "windows": list(WINDOWS), "by": by,
            "groupings": list(GROUPINGS) if by else []}


def _job_usage_charts(job_id: int, window: str) -> dict:
    series = selectors.job_usage_over_time(job_id=job_id, window=window)
    return _charts([series] if series.allocated_gpu_s else [], url=reverse("web:job-usage", args=[job_id]), window=window)


@login_required
def job_usage(request, pk: int):
    """The job page's use-over-time fragment, for another window."""
    try:
        selectors.job_get(user=request.user, job_id=pk)
    except Job.DoesNotExist as error:
        raise Http404("no such job") from error
    return render(request, "web/_usage_charts.html", {"charts": _job_usage_charts(pk, _window(request))})


def _fleet_usage_charts(request) -> dict:
    by = request.GET.get("by", "team")
    by = by if by in GROUPINGS else "team"
    window = _window(request)
    return _charts(selectors.usage_over_time(by=by, window=window), url=reverse("web:fleet-usage"), window=window, by=by)


@login_required
def fleet_usage(request):
    """The fleet page's use-over-time fragment: per team, queue or flavor, over 1 h, 24 h or 7 d."""
    return render(request, "web/_usage_charts.html", {"charts": _fleet_usage_charts(request)})


@login_required
@require_POST
def job_cancel(request, pk: int):
    try:
        services.job_cancel(user=request.user, job_id=pk)
        messages.success(request, f"Job #{pk} cancelled.")
    except Job.DoesNotExist as error:
        raise Http404("no such job") from error
    except (PermissionDenied, ValidationError) as error:
        messages.error(request, " ".join(getattr(error, "messages", [str(error)])))
    return redirect("web:job-detail", pk=pk)


@login_required
def fleet(request):
    summary = selectors.fleet_summary()
    usage = selectors.usage_report(user=request.user)
    context = {"summary": summary, "chart": summary.heatmap, "usage": usage}
    if request.htmx:
        return render(request, "web/_fleet_live.html", context)
    context["usage_charts"] = _fleet_usage_charts(request)
    context["policy"] = [(rule.replace("_", " ").capitalize(), words) for rule, words in selectors.scheduling_policy().items()]
    return render(request, "web/fleet.html", context)


@login_required
def preemption_list(request):
    view = request.GET.get("show")
    if view not in PLAN_VIEWS:
        view = "needs-approval" if is_admin(request.user) else "all"
    context = {"plans": selectors.preemption_list(view=view)[:200], "is_admin": is_admin(request.user), "show": view,
               "views": {"needs-approval": "Needs approval", "decided": "Decided", "all": "All"}}
    return render(request, "web/_preemption_table.html" if request.htmx else "web/preemption_list.html", context)


@login_required
@require_POST
def preemption_decide(request, pk: int, decision: str):
    decide = {"approve": services.preemption_approve, "reject": services.preemption_reject}.get(decision)
    if decide is None:
        raise Http404("unknown decision")
    try:
        decide(actor=request.user, plan_id=pk, comment=request.POST.get("comment", "").strip())
        messages.success(request, f"Plan {pk} {decision}d.")
    except PreemptionPlan.DoesNotExist as error:
        raise Http404("no such plan") from error
    except (PermissionDenied, ValidationError) as error:
        messages.error(request, " ".join(getattr(error, "messages", [str(error)])))
    return redirect("web:preemption-list")


AUDIT_PAGE = 50


@login_required
def audit_list(request):
    """Admins: every record; leads: their teams'. Filters team, action, actor; `before` pages back by id."""
    filters = {key: request.GET.get(key) or None for key in ("team", "action", "actor")}
    if filters["action"] not in {a.value for a in AuditAction}:
        filters["action"] = None
    before = request.GET.get("before", "")
    page = selectors.audit_page(user=request.user, **filters, before=int(before) if before.isdigit() else None,
                                limit=AUDIT_PAGE)
    older = request.GET.copy()
    older["before"] = page.next_before or ""
    return render(request, "web/audit_list.html", {
        "records": page.records, "filters": filters, "next_before": page.next_before, "older_query": older.urlencode(),
        "teams": selectors.audit_teams(user=request.user), "actions": [a.value for a in AuditAction],
        "actors": selectors.audit_actors(user=request.user),
        "is_admin": is_admin(request.user),
    })


def _borrowing(window: str, team: str | None = None) -> dict:
    cohorts = borrowing_over_time(window=window, team=team)
    for index, cohort in enumerate(cohorts):
        cohort.chart_id = f"borrowing-{index}"
    return {"cohorts": cohorts, "url": reverse("web:borrowing"), "window": window, "windows": list(WINDOWS), "team": team,
            "step_s": WINDOWS[window][1]}


@login_required
def borrowing(request):
    """The borrowing-over-time fragment (history and team pages), for another window; team totals are not secret."""
    team = request.GET.get("team") or None
    if team is not None and not Team.objects.filter(name=team).exists():
        raise Http404("no such team")
    return render(request, "web/_borrowing_charts.html", {"borrowing": _borrowing(_window(request), team)})


@login_required
def history(request):
    """Waits, admissions and preemptions per queue and day over the last week, from job events."""
    rows = queue_history(days=7)
    days = sorted({row.day for row in rows})
    series: dict[str, dict[str, list]] = {}
    for row in rows:
        queue = series.setdefault(row.queue, {k: [None] * len(days) for k in ("p50_min", "p95_min", "admissions", "preemptions")})
        i = days.index(row.day)
        queue["p50_min"][i] = None if row.p50_wait_s is None else round(row.p50_wait_s / 60, 1)
        queue["p95_min"][i] = None if row.p95_wait_s is None else round(row.p95_wait_s / 60, 1)
        queue["admissions"][i], queue["preemptions"][i] = row.admissions, row.preemptions
    chart = {"days": [d.isoformat() for d in days], "queues": series}
    return render(request, "web/history.html", {"rows": rows, "chart": chart, "borrowing": _borrowing(_window(request))})


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
    page = selectors.job_page(selectors.job_list(user=request.user, team=name), older_than=_job_id(request.GET.get("older")),
                              newer_than=_job_id(request.GET.get("newer")), size=TEAM_JOBS_PAGE)
    context = {"team": team, "page": page, "filters": {}}
    if request.htmx:
        return render(request, "web/_job_table.html", context)
    queues = selectors.queue_list()  # read once for the glances and the allotments
    glances, borrowing_now = queue_glance(user=request.user, team=name, queues=queues)
    idle = [a for a in selectors.idle_allocations(user=request.user) if a.team == name]
    idle_gpus = selectors.idle_gpus_by_queue(idle)
    for glance in glances:
        glance.idle_gpus = idle_gpus.get(glance.name, 0)
    audit = selectors.audit_page(user=request.user, team=name, limit=TEAM_JOBS_PAGE).records if can_read_audit(request.user) else None
    context.update({
        "glances": glances, "borrowing_now": borrowing_now, "is_admin": is_admin(request.user),
        "members": selectors.team_members(team=team),
        "allotments": [row for row in selectors.allotment_rows(queues=queues) if row["team"] == name],
        "idle": idle,
        "idle_threshold_percent": settings.GANGWAY_IDLE_THRESHOLD_PERCENT, "idle_grace_s": settings.GANGWAY_IDLE_GRACE_S,
        "usage_charts": _team_usage_charts(name, "1h"), "borrowing": _borrowing("1h", name), "audit": audit,
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
    return _charts(series + (queues if len(queues) > 1 else []), url=reverse("web:team-usage", args=[name]), window=window)


@login_required
def team_usage(request, name: str):
    """The team page's use-over-time fragment, for another window."""
    _visible_team(request.user, name)
    return render(request, "web/_usage_charts.html", {"charts": _team_usage_charts(name, _window(request))})
