"""Preemption plans: the victims that would make room for a job, their cost, and an admin's decision."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from scheduling.core.model import PendingReason


class PlanStatus(models.TextChoices):
    PROPOSED = "proposed", "Proposed"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXECUTED = "executed", "Executed"
    SUPERSEDED = "superseded", "Superseded"


OPEN_PLAN_STATUSES = [PlanStatus.PROPOSED, PlanStatus.APPROVED]


class PreemptionPlan(models.Model):
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="preemption_plans")
    victims = models.ManyToManyField("scheduling.Job", through="PreemptionVictim", related_name="+")
    domain = models.CharField(max_length=200, blank=True, default="")
    reason = models.CharField(max_length=32, choices=[(r.value, r.name.title()) for r in PendingReason])
    cost_gpu_hours = models.FloatField(default=0.0)
    teams_affected = models.JSONField(default=list, blank=True)
    needs_approval = models.BooleanField(default=False)
    state_fingerprint = models.CharField(max_length=32, blank=True, default="")
    """The state a plan awaiting approval was made on: while it holds, the next passes propose it again
    without planning (the core's `preemption.state_fingerprint`)."""
    status = models.CharField(max_length=16, choices=PlanStatus.choices, default=PlanStatus.PROPOSED)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(status__in=["proposed", "approved"]),
                name="preemption_one_open_plan_per_job",
            ),
            models.CheckConstraint(condition=models.Q(cost_gpu_hours__gte=0), name="preemption_cost_non_negative"),
        ]

    def __str__(self) -> str:
        return f"plan {self.pk} for job {self.job_id} ({self.status})"


class PreemptionVictim(models.Model):
    plan = models.ForeignKey(PreemptionPlan, on_delete=models.CASCADE, related_name="victim_rows")
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="+")
    gpus = models.PositiveIntegerField()
    cost_gpu_hours = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["plan", "job"], name="victim_unique_plan_job")]
