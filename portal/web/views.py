"""Server-rendered pages: jobs (list, submit, detail), fleet, queues, preemption plans and the audit log."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.web.forms import AllotmentForm, JobSubmitForm, QuotaForm, filled_rows, pod_set_formset
from scheduling import selectors, services
from scheduling.core.model import JobState
from scheduling.models import AuditAction, FleetSettings, Flavor, Job, PreemptionPlan, Queue, Team
from scheduling.permissions import can_cancel_job, can_edit_team_queues, is_admin, team_ids_of
from scheduling.selectors.glance import queue_glance
from scheduling.selectors.history import queue_history
from scheduling.selectors.preemption import PLAN_VIEWS
from scheduling.selectors.usage import GROUPINGS, WINDOWS
from scheduling.selectors.explanations import job_explanation_get
from scheduling.services import explanations as explanation_services


@login_required
def job_list(request):
    filters = {key: request.GET.get(key) or None for key in ("queue", "team", "state", "owner")}
    if filters["state"] and filters["state"] not in {s.value for s in JobState}:
        filters["state"] = None
    page = selectors.job_page(selectors.job_list(user=request.user, **filters), older_than=_job_id(request.GET.get("older")),
                              newer_than=_job_id(request.GET.get("newer")))
    return render(
        request,
        "web/_job_table.html" if request.htmx else "web/job_list.html",
        {
            "page": page,
            "filters": filters,
            "states": [s.value for s in JobState],
            "queues": Queue.objects.order_by("name").values_list("name", flat=True),
        },
    )


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
        "flavors": list(Flavor.objects.order_by("name").values_list("name", flat=True)),
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
    return render(request, "web/fleet.html", context)


@login_required
def queue_list(request):
    queues = selectors.queue_list()
    idle_gpus: dict[str, int] = {}
    for allocation in selectors.idle_allocations(user=request.user):
        idle_gpus[allocation.queue] = idle_gpus.get(allocation.queue, 0) + allocation.gpus
    for queue in queues:
        queue.can_edit = can_edit_team_queues(request.user, queue.team_id)
        queue.idle_gpus = idle_gpus.get(queue.name, 0)
        usage = getattr(queue, "usage", None)
        queue.usage_gpu_hours = usage.usage_gpu_s / 3600 if usage else None
        queue.quota_rows = [
            {"quota": quota, "in_use": queue.gpus_in_use.get(quota.flavor.name, 0)} for quota in queue.quotas.all()
        ]
    glances, borrowing = queue_glance(user=request.user, queues=queues)
    return render(request, "web/queue_list.html", {
        "queues": queues, "allotments": selectors.allotment_rows(queues=queues), "is_admin": is_admin(request.user),
        "glances": glances, "borrowing": borrowing,
    })


def _post_change(request, form, apply, *, missing: type[Exception]):
    """Run `apply(cleaned_data)` for a valid form: its result, or None with the errors flashed as a message."""
    if not form.is_valid():
        messages.error(request, _error_text(form.errors))
        return None
    try:
        return apply(form.cleaned_data)
    except missing as error:
        raise Http404(str(error)) from error
    except ValidationError as error:
        messages.error(request, _error_text(error.message_dict))
    except PermissionDenied as error:
        messages.error(request, str(error))
    return None


def _error_text(errors: dict) -> str:
    return "; ".join(f"{field}: {' '.join(reasons)}" for field, reasons in errors.items())


@login_required
@require_POST
def queue_quota_edit(request, name: str, flavor: str):
    def save(quota):
        services.queue_update(actor=request.user, queue_name=name, quotas={flavor: quota})
        messages.success(request, f"Quota of {name} for {flavor} saved.")

    _post_change(request, QuotaForm(request.POST), save, missing=Queue.DoesNotExist)
    return redirect("web:queue-list")


@login_required
@require_POST
def queue_quota_preview(request, name: str, flavor: str):
    """The quota form's Preview button: waits before vs after the proposed quota, nothing saved."""
    return _preview_page(
        request, QuotaForm(request.POST),
        lambda quota: explanation_services.queue_quota_preview(actor=request.user, queue_name=name, quotas={flavor: quota}),
        missing=Queue.DoesNotExist, subject=f"queue {name}, {flavor}", jobs_heading="This queue's pending jobs",
        describe=lambda quota: (f"nominal {quota['nominal']}, borrowing limit {_or(quota['borrowing_limit'], '∞')}, "
                                f"lending limit {_or(quota['lending_limit'], 'all')}"),
    )


def _preview_page(request, form, run, *, missing, subject: str, jobs_heading: str, describe):
    preview = _post_change(request, form, run, missing=missing)
    if preview is None:
        return redirect("web:queue-list")
    return render(request, "web/change_preview.html", {
        "preview": preview, "subject": subject, "proposal": describe(form.cleaned_data), "jobs_heading": jobs_heading,
        "assumption": preview.get("assumption"),
    })


@login_required
@require_POST
def team_allotment_edit(request, name: str, flavor: str):
    def save(allotment):
        services.team_update(actor=request.user, team_name=name, allotments={flavor: allotment["gpus"]})
        messages.success(request, f"Allotment of {name} for {flavor} saved.")

    _post_change(request, AllotmentForm(request.POST), save, missing=Team.DoesNotExist)
    return redirect("web:queue-list")


@login_required
@require_POST
def team_allotment_preview(request, name: str, flavor: str):
    """Admins: waits before vs after a proposed allotment (the team's queues scaled to it), nothing saved."""
    return _preview_page(
        request, AllotmentForm(request.POST),
        lambda allotment: explanation_services.team_allotment_preview(
            actor=request.user, team_name=name, allotments={flavor: allotment["gpus"]}),
        missing=Team.DoesNotExist, subject=f"team {name}, {flavor}", jobs_heading="The team's pending jobs",
        describe=lambda allotment: f"allotment {allotment['gpus']} GPUs",
    )


def _or(value, default: str):
    return default if value is None else value


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
    return render(request, "web/history.html", {"rows": rows, "chart": chart})
