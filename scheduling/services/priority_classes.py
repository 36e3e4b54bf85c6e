"""Priority class writes (admins only), and how a submission's class is resolved for its team."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduling.core.model import JobState
from scheduling.models import AuditAction, Job, PriorityClass, Team
from scheduling.permissions import is_admin
from scheduling.services.audit import audit_record, changes
from scheduling.services.common import MAX_PRIORITY, Errors, create_named, is_count, reconcile_after_commit, validate_new_name

UNSET = object()


def priority_class_resolve(*, name: str | None, team: Team) -> PriorityClass | None:
    """The class a job of `team` runs at: `name`, or the default class when None (None when there is no default).
    Raises ValidationError on `priority_class` when the class is unknown or `team` may not use it."""
    if name is None or name == "":
        return PriorityClass.objects.filter(is_default=True).first()
    found = PriorityClass.objects.filter(name=name).first() if isinstance(name, str) else None
    if found is None:
        raise ValidationError({"priority_class": [f"unknown priority class {name!r}"]})
    if not found.is_for_all_teams and not found.teams.filter(pk=team.pk).exists():
        raise ValidationError({"priority_class": [f"team {team.name} may not use priority class {found.name}"]})
    return found


def _clean(errors: Errors, *, value, description, is_default, teams, max_gpus_per_team) -> list[Team] | None:
    """Check the given fields (UNSET ones are skipped); the teams named, or None for every team."""
    if value is not UNSET and (not is_count(value) or abs(value) > MAX_PRIORITY):
        errors.add("value", f"must be an integer between -{MAX_PRIORITY} and {MAX_PRIORITY}")
    if description is not UNSET and (not isinstance(description, str) or len(description) > 500):
        errors.add("description", "must be a string of at most 500 characters")
    if is_default is not UNSET and not isinstance(is_default, bool):
        errors.add("is_default", "must be true or false")
    if max_gpus_per_team is not UNSET and max_gpus_per_team is not None and (not is_count(max_gpus_per_team) or not 0 <= max_gpus_per_team <= 2**31 - 1):
        errors.add("max_gpus_per_team", "must be null (no cap) or an integer ≥ 0")
    if teams is UNSET or teams is None:
        return None
    if not isinstance(teams, list) or not all(isinstance(t, str) for t in teams):
        errors.add("teams", "must be null (every team) or a list of team names")
        return None
    found = {t.name: t for t in Team.objects.filter(name__in=teams)}
    for name in teams:
        if name not in found:
            errors.add("teams", f"unknown team {name!r}")
    return list(found.values())


def _state(pc: PriorityClass) -> dict:
    """What the audit log records of a class."""
    return {
        "value": pc.value,
        "description": pc.description,
        "is_default": pc.is_default,
        "teams": None if pc.is_for_all_teams else sorted(t.name for t in pc.teams.all()),
        "max_gpus_per_team": pc.max_gpus_per_team,
    }


def _save(pc: PriorityClass, *, is_default, teams, team_rows: list[Team] | None) -> None:
    if is_default is True:
        PriorityClass.objects.filter(is_default=True).exclude(pk=pc.pk).update(is_default=False)
    pc.save()
    if teams is not UNSET:
        pc.teams.set(team_rows or [])


@transaction.atomic
def priority_class_create(
    *, actor, name: str, value: int, description: str = "", is_default: bool = False,
    teams: list[str] | None = None, max_gpus_per_team: int | None = None, validate_only: bool = False,
) -> PriorityClass | None:
    """A new class; `teams` None lets every team use it; `is_default` takes the default from the current one.
    `validate_only`: check, write nothing."""
    if not is_admin(actor):
        raise PermissionDenied("only admins define priority classes")
    errors = Errors()
    validate_new_name(errors, PriorityClass, name)
    team_rows = _clean(errors, value=value, description=description, is_default=is_default, teams=teams,
                       max_gpus_per_team=max_gpus_per_team)
    errors.raise_if_any()
    if validate_only:
        return None
    # Inserted as not the default: the one-default constraint is settled by _save, the name's by create_named.
    pc = create_named(PriorityClass, name=name, value=value, description=description, is_default=False,
                      is_for_all_teams=teams is None, max_gpus_per_team=max_gpus_per_team)
    pc.is_default = is_default
    _save(pc, is_default=is_default, teams=teams, team_rows=team_rows)
    audit_record(actor=actor, action=AuditAction.PRIORITY_CLASS_CREATE, target=pc, after=_state(pc))
    return pc


@transaction.atomic
def priority_class_update(
    *, actor, name: str, value=UNSET, description=UNSET, is_default=UNSET, teams=UNSET, max_gpus_per_team=UNSET,
    validate_only: bool = False,
) -> PriorityClass | None:
    """Change the given fields. A new value applies to the class's pending jobs too (their place in the queue);
    a new cap applies from the next pass (running jobs are never stopped for it). `validate_only`: check, write
    nothing."""
    if not is_admin(actor):
        raise PermissionDenied("only admins change priority classes")
    pc = PriorityClass.objects.select_for_update().filter(name=name).first()
    if pc is None:
        raise PriorityClass.DoesNotExist(name)
    errors = Errors()
    team_rows = _clean(errors, value=value, description=description, is_default=is_default, teams=teams,
                       max_gpus_per_team=max_gpus_per_team)
    errors.raise_if_any()
    if validate_only:
        return None
    before = _state(pc)
    for field, given in (("value", value), ("description", description), ("is_default", is_default),
                         ("max_gpus_per_team", max_gpus_per_team)):
        if given is not UNSET:
            setattr(pc, field, given)
    if teams is not UNSET:
        pc.is_for_all_teams = teams is None
    _save(pc, is_default=is_default, teams=teams, team_rows=team_rows)
    if value is not UNSET and value != before["value"]:
        Job.objects.filter(priority_class=pc, state=JobState.PENDING.value, priority=before["value"]).update(priority=value)
    old, new = changes(before, _state(pc))
    if new:
        audit_record(actor=actor, action=AuditAction.PRIORITY_CLASS_UPDATE, target=pc, before=old, after=new)
        reconcile_after_commit()
    return pc
