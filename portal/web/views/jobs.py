"""The job pages: the list (with the first screen's overview), submit, detail, use over time, cancel."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, Sum
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.web.forms import JobSubmitForm, filled_rows, pod_set_formset
from portal.web.views.parts import job_id_of, usage_charts, window_of
from scheduling import selectors, services
from scheduling.core.model import JobState
from scheduling.models import FleetSettings, Flavor, Job, Queue
from scheduling.permissions import can_cancel_job, is_admin, team_ids_of
from scheduling.selectors.explanations import job_explanation_get
from scheduling.selectors.preemption import open_plan_for_job, open_plans_taking


@login_required
def job_list(request):
    filters = {key: request.GET.get(key) or None for key in ("queue", "team", "state", "owner")}
    if filters["state"] and filters["state"] not in {s.value for s in JobState}:
        filters["state"] = None
    page = selectors.job_page(selectors.job_list(user=request.user, **filters), older_than=job_id_of(request.GET.get("older")),
                              newer_than=job_id_of(request.GET.get("newer")))
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
        "taken_by": open_plans_taking(job_id=job.pk) if idle else [],
    }
    if request.htmx:
        return render(request, "web/_job_live.html", context)
    context["usage_charts"] = _job_usage_charts(job.pk, "1h")
    return render(request, "web/job_detail.html", context)


def _job_usage_charts(job_id: int, window: str) -> dict:
    series = selectors.job_usage_over_time(job_id=job_id, window=window)
    return usage_charts([series] if series.allocated_gpu_s else [], url=reverse("web:job-usage", args=[job_id]), window=window)


@login_required
def job_usage(request, pk: int):
    """The job page's use-over-time fragment, for another window."""
    try:
        selectors.job_get(user=request.user, job_id=pk)
    except Job.DoesNotExist as error:
        raise Http404("no such job") from error
    return render(request, "web/_usage_charts.html", {"charts": _job_usage_charts(pk, window_of(request))})


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
