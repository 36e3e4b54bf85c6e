"""The audit log: one append-only record of every change a person makes, written with the change itself."""

from __future__ import annotations

import enum

from django.conf import settings
from django.db import models


class AuditAction(enum.StrEnum):
    TEAM_CREATE = "team.create"
    ALLOTMENT_UPDATE = "team.allotment_update"
    QUEUE_CREATE = "queue.create"
    QUEUE_SETTINGS_UPDATE = "queue.settings_update"
    QUOTA_UPDATE = "queue.quota_update"
    PREEMPTION_APPROVE = "preemption.approve"
    PREEMPTION_REJECT = "preemption.reject"
    JOB_CANCEL = "job.cancel"
    NODE_CORDON = "node.cordon"
    NODE_UNCORDON = "node.uncordon"
    PRIORITY_CLASS_CREATE = "priority_class.create"
    PRIORITY_CLASS_UPDATE = "priority_class.update"


class AppendOnlyError(RuntimeError):
    """An audit record was about to be changed or deleted."""


class AuditRecord(models.Model):
    """Who did what to which object, when, with the values before and after and an optional comment."""

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    actor_name = models.CharField(max_length=150, help_text="The actor's username when it acted; kept if the user goes.")
    action = models.CharField(max_length=32, choices=[(a.value, a.value) for a in AuditAction])
    target_type = models.CharField(max_length=32)
    target_id = models.CharField(max_length=253)
    team = models.ForeignKey("scheduling.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["team", "-id"], name="audit_team_id"),
            models.Index(fields=["action", "-id"], name="audit_action_id"),
            models.Index(fields=["actor_name", "-id"], name="audit_actor_id"),
            models.Index(fields=["target_type", "target_id", "-id"], name="audit_target_id"),
        ]

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"audit record {self.pk} is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"audit record {self.pk} is append-only")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target_type} {self.target_id}"
