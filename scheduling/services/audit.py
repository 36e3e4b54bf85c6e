"""The audit trail's one write: append a record of a person's change, inside the change's transaction."""

from __future__ import annotations

from django.db import models

from scheduling.models import AuditAction, AuditRecord, Node, PriorityClass, Queue, Team

NAMED_TARGETS = (Team, Queue, Node, PriorityClass)
"""Targets recorded by their unique name (stable and readable); others by primary key."""


def audit_record(
    *, actor, action: AuditAction, target: models.Model, team: Team | None = None,
    before: dict | None = None, after: dict | None = None, comment: str = "",
) -> AuditRecord:
    """Record that `actor` did `action` to `target` (values `before` → `after`). Call it after the change,
    inside its transaction: the record commits with the change or not at all."""
    return AuditRecord.objects.create(
        actor=actor if actor.is_authenticated else None,
        actor_name=actor.get_username(),
        action=action,
        target_type=target._meta.model_name,
        target_id=str(target.name if isinstance(target, NAMED_TARGETS) else target.pk),
        team=team,
        before=before,
        after=after,
        comment=comment or "",
    )


def changes(before: dict, after: dict) -> tuple[dict, dict]:
    """Only the keys whose values differ, as (before, after); ({}, {}) when nothing changed."""
    keys = [key for key in {**before, **after} if before.get(key) != after.get(key)]
    return {key: before.get(key) for key in keys}, {key: after.get(key) for key in keys}
