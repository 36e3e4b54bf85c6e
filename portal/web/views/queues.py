"""The queues page and its changes: quota and allotment forms, saved or previewed (waits before vs after)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.web.forms import AllotmentForm, ChangeForm, QuotaForm
from portal.web.views.parts import idle_gpus_by_queue
from scheduling import selectors, services
from scheduling.models import Queue, Team
from scheduling.permissions import can_edit_team_queues, is_admin
from scheduling.selectors.glance import queue_glance
from scheduling.services import explanations as explanation_services


@login_required
def queue_list(request):
    return _queue_page(request)


def _queue_page(request, failed: ChangeForm | None = None):
    """The queues page; after a refused change, with that form as typed and its errors beside its fields (400)."""
    queues = selectors.queue_list()
    idle_gpus = idle_gpus_by_queue(selectors.idle_allocations(user=request.user))
    for queue in queues:
        queue.can_edit = can_edit_team_queues(request.user, queue.team_id)
        queue.idle_gpus = idle_gpus.get(queue.name, 0)
        usage = getattr(queue, "usage", None)
        queue.usage_gpu_hours = usage.usage_gpu_s / 3600 if usage else None
        queue.quota_rows = []
        for quota in queue.quotas.all():
            subject = f"{queue.name} {quota.flavor.name}"
            form = None
            if queue.can_edit:
                form = failed if failed is not None and failed.subject == ("quota", subject) else _quota_form(quota, subject)
            queue.quota_rows.append({"quota": quota, "in_use": queue.gpus_in_use.get(quota.flavor.name, 0), "form": form})
    allotments = selectors.allotment_rows(queues=queues)
    if is_admin(request.user):
        for row in allotments:
            subject = f"{row['team']} {row['flavor']}"
            is_failed = failed is not None and failed.subject == ("allotment", subject)
            row["form"] = failed if is_failed else AllotmentForm(initial={"gpus": row["gpus"]}, subject=subject)
    glances, borrowing = queue_glance(user=request.user, queues=queues)
    for glance in glances:
        glance.idle_gpus = idle_gpus.get(glance.name, 0)
    return render(request, "web/queue_list.html", {
        "queues": queues, "allotments": allotments, "is_admin": is_admin(request.user),
        "glances": glances, "borrowing": borrowing, "failed": failed,
    }, status=400 if failed is not None else 200)


def _quota_form(quota, subject: str) -> QuotaForm:
    return QuotaForm(initial={"nominal": quota.nominal, "borrowing_limit": quota.borrowing_limit,
                              "lending_limit": quota.lending_limit}, subject=subject)


def _change_form(request, form_class: type[ChangeForm], kind: str, subject: str) -> ChangeForm:
    form = form_class(request.POST, subject=subject)
    form.subject = (kind, subject)
    return form


def _post_change(request, form: ChangeForm, apply, *, missing: type[Exception]):
    """`apply(cleaned_data)` for a valid form: (its result, None); else (None, the queues page with the form's
    errors beside its fields and the values as typed)."""
    if form.is_valid():
        try:
            return apply(form.cleaned_data), None
        except missing as error:
            raise Http404(str(error)) from error
        except ValidationError as error:
            form.add_service_errors(error.message_dict)
        except PermissionDenied as error:
            messages.error(request, str(error))
            return None, redirect("web:queue-list")
    form.mark_errors()
    return None, _queue_page(request, failed=form)


@login_required
@require_POST
def queue_quota_edit(request, name: str, flavor: str):
    def save(quota):
        services.queue_update(actor=request.user, queue_name=name, quotas={flavor: quota})
        messages.success(request, f"Quota of {name} for {flavor} saved.")

    _, refused = _post_change(request, _change_form(request, QuotaForm, "quota", f"{name} {flavor}"), save, missing=Queue.DoesNotExist)
    return refused or redirect(f"{reverse('web:queue-list')}#queue-{name}")


@login_required
@require_POST
def queue_quota_preview(request, name: str, flavor: str):
    """The quota form's Preview button: waits before vs after the proposed quota, nothing saved."""
    return _preview_page(
        request, _change_form(request, QuotaForm, "quota", f"{name} {flavor}"),
        lambda quota: explanation_services.queue_quota_preview(actor=request.user, queue_name=name, quotas={flavor: quota}),
        missing=Queue.DoesNotExist, subject=f"queue {name}, {flavor}", jobs_heading="This queue's pending jobs",
        describe=lambda quota: (f"nominal {quota['nominal']}, borrowing limit {_or(quota['borrowing_limit'], '∞')}, "
                                f"lending limit {_or(quota['lending_limit'], 'all')}"),
        save_url=reverse("web:queue-quota-edit", args=[name, flavor]),
    )


def _preview_page(request, form, run, *, missing, subject: str, jobs_heading: str, describe, save_url: str):
    preview, refused = _post_change(request, form, run, missing=missing)
    if refused is not None:
        return refused
    return render(request, "web/change_preview.html", {
        "preview": preview, "subject": subject, "proposal": describe(form.cleaned_data), "jobs_heading": jobs_heading,
        "assumption": preview.get("assumption"), "save_url": save_url, "values": form.cleaned_data,
    })


@login_required
@require_POST
def team_allotment_edit(request, name: str, flavor: str):
    def save(allotment):
        services.team_update(actor=request.user, team_name=name, allotments={flavor: allotment["gpus"]})
        messages.success(request, f"Allotment of {name} for {flavor} saved.")

    form = _change_form(request, AllotmentForm, "allotment", f"{name} {flavor}")
    _, refused = _post_change(request, form, save, missing=Team.DoesNotExist)
    return refused or redirect("web:queue-list")


@login_required
@require_POST
def team_allotment_preview(request, name: str, flavor: str):
    """Admins: waits before vs after a proposed allotment (the team's queues scaled to it), nothing saved."""
    return _preview_page(
        request, _change_form(request, AllotmentForm, "allotment", f"{name} {flavor}"),
        lambda allotment: explanation_services.team_allotment_preview(
            actor=request.user, team_name=name, allotments={flavor: allotment["gpus"]}),
        missing=Team.DoesNotExist, subject=f"team {name}, {flavor}", jobs_heading="The team's pending jobs",
        describe=lambda allotment: f"allotment {allotment['gpus']} GPUs",
        save_url=reverse("web:team-allotment-edit", args=[name, flavor]),
    )


def _or(value, default: str):
    return default if value is None else value
