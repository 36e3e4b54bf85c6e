"""The queues page: team allotments, queues and their quotas as values, each change form opened on demand (htmx puts
it in its row; without JavaScript it is a page of its own), saved, or previewed before saving."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from portal.web.forms import AllotmentForm, ChangeForm, QuotaForm
from portal.web.views.parts import idle_gpus_by_queue
from scheduling import selectors, services
from scheduling.models import Queue, Team, TeamAllotment
from scheduling.permissions import can_edit_team_queues, is_admin
from scheduling.selectors.glance import queue_glance
from scheduling.services import explanations as explanation_services


@login_required
def queue_list(request):
    return _queue_page(request)


def _queue_page(request, failed: ChangeForm | None = None):
    """The queues page, values only (a page of fifty queues with every form rendered was mostly forms); after a
    refused change without JavaScript, with that one form as typed and its errors beside its fields (400)."""
    queues = selectors.queue_list()
    idle_gpus = idle_gpus_by_queue(selectors.idle_allocations(user=request.user))
    for queue in queues:
        can_edit = can_edit_team_queues(request.user, queue.team_id)
        queue.idle_gpus = idle_gpus.get(queue.name, 0)
        usage = getattr(queue, "usage", None)
        queue.usage_gpu_hours = usage.usage_gpu_s / 3600 if usage else None
        queue.quota_rows = [
            _quota_row(queue, quota, can_edit=can_edit, form=_if_failed(failed, "quota", f"{queue.name} {quota.flavor.name}"))
            for quota in queue.quotas.all()
        ]
    allotments = selectors.allotment_rows(queues=queues)
    for row in allotments:
        row.update(can_edit=is_admin(request.user), form=_if_failed(failed, "allotment", f"{row['team']} {row['flavor']}"))
    glances, borrowing = queue_glance(user=request.user, queues=queues)
    for glance in glances:
        glance.idle_gpus = idle_gpus.get(glance.name, 0)
    return render(request, "web/queue_list.html", {
        "queues": queues, "allotments": allotments, "is_admin": is_admin(request.user),
        "glances": glances, "borrowing": borrowing, "failed": failed,
    }, status=400 if failed is not None else 200)


def _if_failed(failed: ChangeForm | None, kind: str, subject: str) -> ChangeForm | None:
    return failed if failed is not None and failed.subject == (kind, subject) else None


def _quota_row(queue: Queue, quota, *, can_edit: bool, form: ChangeForm | None = None) -> dict:
    """What web/_quota.html shows of one quota: its values, and its change form when open."""
    return {"queue": queue.name, "quota": quota, "in_use": queue.gpus_in_use.get(quota.flavor.name, 0),
            "can_edit": can_edit, "form": form}


def _one_quota_row(request, name: str, flavor: str, form: ChangeForm | None = None) -> dict:
    try:
        queue = selectors.queue_get(name=name)
    except Queue.DoesNotExist as error:
        raise Http404("no such queue") from error
    quota = next((quota for quota in queue.quotas.all() if quota.flavor.name == flavor), None)
    if quota is None:
        raise Http404(f"queue {name} has no quota of {flavor}")
    return _quota_row(queue, quota, can_edit=can_edit_team_queues(request.user, queue.team_id), form=form)


def _one_allotment_row(name: str, flavor: str, form: ChangeForm | None = None) -> dict:
    try:
        allotment = selectors.allotment_get(team_name=name, flavor_name=flavor)
    except TeamAllotment.DoesNotExist as error:
        raise Http404(f"team {name} has no allotment of {flavor}") from error
    return {"team": name, "flavor": flavor, "gpus": allotment.gpus, "can_edit": True, "form": form}


def _change_form(request, form_class: type[ChangeForm], kind: str, subject: str) -> ChangeForm:
    form = form_class(request.POST, subject=subject)
    form.subject = (kind, subject)
    return form


def _opened(form: ChangeForm) -> ChangeForm:
    """A form opened on demand: the reader types into its first field straight away (the link that opened it is gone)."""
    next(iter(form.fields.values())).widget.attrs["autofocus"] = True
    return form


def _post_change(request, form: ChangeForm, apply, *, missing: type[Exception], refused_in_row):
    """`apply(cleaned_data)` for a valid form: (its result, None); else (None, the form again with its errors beside
    its fields and the values as typed, 400): `refused_in_row(form)` for htmx, which swaps it into its row; the whole
    queues page otherwise."""
    if form.is_valid():
        try:
            return apply(form.cleaned_data), None
        except missing as error:
            raise Http404(str(error)) from error
        except ValidationError as error:
            form.add_service_errors(error.message_dict)
        except PermissionDenied as error:
            messages.error(request, str(error))
            return None, _to(request, reverse("web:queue-list"))
    form.mark_errors()
    return None, refused_in_row(form) if request.htmx and refused_in_row else _queue_page(request, failed=form)


def _to(request, url: str, anchor: str = ""):
    """To `url` after a change. htmx is told to load it as a whole page (following a redirect itself, it would swap
    that page into the form's row), without the anchor: from the queues page, the same page with an anchor only scrolls."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url + anchor)


@login_required
@require_http_methods(["GET", "POST"])
def queue_quota_edit(request, name: str, flavor: str):
    """GET: the quota's change form (htmx: its row, the form open; otherwise a page of its own). POST: save it."""
    subject = f"{name} {flavor}"
    if request.method != "POST":
        row = _one_quota_row(request, name, flavor)
        if not row["can_edit"]:
            raise PermissionDenied(f"only the leads of queue {name}'s team and admins change its quotas")
        quota = row["quota"]
        row["form"] = _opened(QuotaForm(initial={"nominal": quota.nominal, "borrowing_limit": quota.borrowing_limit,
                                                 "lending_limit": quota.lending_limit}, subject=subject))
        return render(request, "web/_quota.html" if request.htmx else "web/quota_edit.html", {"row": row})

    def save(quota):
        services.queue_update(actor=request.user, queue_name=name, quotas={flavor: quota})
        messages.success(request, f"Quota of {name} for {flavor} saved.")

    form = _change_form(request, QuotaForm, "quota", subject)
    _, refused = _post_change(request, form, save, missing=Queue.DoesNotExist, refused_in_row=lambda form: render(
        request, "web/_quota.html", {"row": _one_quota_row(request, name, flavor, form)}, status=400))
    return refused or _to(request, reverse("web:queue-list"), f"#queue-{name}")


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
    # The Preview button submits without htmx: the preview is a page of its own, and so is a refusal.
    preview, refused = _post_change(request, form, run, missing=missing, refused_in_row=None)
    if refused is not None:
        return refused
    return render(request, "web/change_preview.html", {
        "preview": preview, "subject": subject, "proposal": describe(form.cleaned_data), "jobs_heading": jobs_heading,
        "assumption": preview.get("assumption"), "save_url": save_url, "values": form.cleaned_data,
    })


@login_required
@require_http_methods(["GET", "POST"])
def team_allotment_edit(request, name: str, flavor: str):
    """Admins. GET: the allotment's change form (htmx: its cell, the form open; otherwise a page of its own).
    POST: save it."""
    subject = f"{name} {flavor}"
    if request.method != "POST":
        if not is_admin(request.user):
            raise PermissionDenied("only admins change allotments")
        row = _one_allotment_row(name, flavor)
        row["form"] = _opened(AllotmentForm(initial={"gpus": row["gpus"]}, subject=subject))
        return render(request, "web/_allotment.html" if request.htmx else "web/allotment_edit.html", {"row": row})

    def save(allotment):
        services.team_update(actor=request.user, team_name=name, allotments={flavor: allotment["gpus"]})
        messages.success(request, f"Allotment of {name} for {flavor} saved.")

    form = _change_form(request, AllotmentForm, "allotment", subject)
    _, refused = _post_change(request, form, save, missing=Team.DoesNotExist, refused_in_row=lambda form: render(
        request, "web/_allotment.html", {"row": _one_allotment_row(name, flavor, form)}, status=400))
    return refused or _to(request, reverse("web:queue-list"))


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
