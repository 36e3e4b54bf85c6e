"""Team writes: create teams and set their GPU allotments (admins only)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Sum

from scheduling.models import AuditAction, Flavor, QueueQuota, Team, TeamAllotment
from scheduling.permissions import is_admin
from scheduling.services.audit import audit_record, changes
from scheduling.services.common import Errors, create_named, is_count, validate_new_name

def _clean_allotments(errors: Errors, allotments) -> dict[Flavor, int]:
    if not isinstance(allotments, dict):
        errors.add("allotments", "must be an object mapping flavor name to GPUs")
        return {}
    flavors = {f.name: f for f in Flavor.objects.filter(name__in=[k for k in allotments if isinstance(k, str)])}
    clean = {}
    for flavor_name, gpus in allotments.items():
        field = f"allotments.{flavor_name}"
        if flavor_name not in flavors:
            errors.add(field, f"unknown flavor {flavor_name!r}")
        elif not is_count(gpus) or gpus < 0:
            errors.add(field, "must be an integer ≥ 0")
        else:
            clean[flavors[flavor_name]] = gpus
    return clean


@transaction.atomic
def team_create(*, actor, name: str, allotments: dict | None = None, validate_only: bool = False) -> Team | None:
    """A new team with its allotments (admins). `validate_only`: check, write nothing."""
    if not is_admin(actor):
        raise PermissionDenied("only admins create teams")
    errors = Errors()
    validate_new_name(errors, Team, name)
    clean = _clean_allotments(errors, allotments or {})
    errors.raise_if_any()
    if validate_only:
        return None
    team = create_named(Team, name=name)
    TeamAllotment.objects.bulk_create(TeamAllotment(team=team, flavor=flavor, gpus=gpus) for flavor, gpus in clean.items())
    audit_record(actor=actor, action=AuditAction.TEAM_CREATE, target=team, team=team, after={"allotments": _allotments(team)})
    return team


@transaction.atomic
def team_update(*, actor, team_name: str, allotments: dict | None = None, validate_only: bool = False) -> Team | None:
    """Set the allotment of each flavor given (0 removes it); flavors not given keep theirs. `validate_only`: check,
    write nothing."""
    if not is_admin(actor):
        raise PermissionDenied("only admins change allotments")
    team = Team.objects.select_for_update().filter(name=team_name).first()
    if team is None:
        raise Team.DoesNotExist(team_name)
    errors = Errors()
    clean = _clean_allotments(errors, allotments if allotments is not None else {})
    nominal_by_flavor = dict(
        QueueQuota.objects.filter(queue__team=team, flavor__in=list(clean))
        .values("flavor_id")
        .annotate(total=Sum("nominal"))
        .values_list("flavor_id", "total")
    )
    for flavor, gpus in clean.items():
        in_queues = nominal_by_flavor.get(flavor.pk, 0)
        if gpus < in_queues:
            errors.add(f"allotments.{flavor.name}", f"{gpus} is below the {in_queues} GPUs the team's queues hold as nominal quota")
    errors.raise_if_any()
    if validate_only:
        return None
    before = _allotments(team)
    for flavor, gpus in clean.items():
        if gpus == 0:
            TeamAllotment.objects.filter(team=team, flavor=flavor).delete()
        else:
            TeamAllotment.objects.update_or_create(team=team, flavor=flavor, defaults={"gpus": gpus})
    old, new = changes(before, _allotments(team))
    if new:
        audit_record(actor=actor, action=AuditAction.ALLOTMENT_UPDATE, target=team, team=team, before=old, after=new)
    return team


def _allotments(team: Team) -> dict[str, int]:
    """Flavor → GPUs allotted, as the audit log records them (a flavor without an allotment is absent)."""
    return dict(TeamAllotment.objects.filter(team=team).values_list("flavor__name", "gpus"))
