"""The fleet-wide pages: the fleet and its use over time, preemption plans and their decisions, the history of waits
and borrowing, and the audit log."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.web.views.parts import borrowing_charts, usage_charts, window_of
from scheduling import selectors, services
from scheduling.models import AuditAction, PreemptionPlan, Team
from scheduling.permissions import is_admin
from scheduling.selectors.history import queue_history
from scheduling.selectors.preemption import PLAN_VIEWS
from scheduling.selectors.usage import GROUPINGS


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


def _fleet_usage_charts(request) -> dict:
    by = request.GET.get("by", "team")
    by = by if by in GROUPINGS else "team"
    window = window_of(request)
    return usage_charts(selectors.usage_over_time(by=by, window=window), url=reverse("web:fleet-usage"), window=window, by=by)


@login_required
def fleet_usage(request):
    """The fleet page's use-over-time fragment: per team, queue or flavor, over 1 h, 24 h or 7 d."""
    return render(request, "web/_usage_charts.html", {"charts": _fleet_usage_charts(request)})


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


@login_required
def borrowing(request):
    """The borrowing-over-time fragment (history and team pages), for another window; team totals are not secret."""
    team = request.GET.get("team") or None
    if team is not None and not Team.objects.filter(name=team).exists():
        raise Http404("no such team")
    return render(request, "web/_borrowing_charts.html", {"borrowing": borrowing_charts(window_of(request), team)})


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
    return render(request, "web/history.html", {"rows": rows, "chart": chart, "borrowing": borrowing_charts(window_of(request))})
