"""Cohorts, queues with their per-flavor quotas, and each queue's decayed historical usage."""

from __future__ import annotations

from django.db import models

from scheduling.core.model import PreemptionPolicy, QueueingStrategy


class Cohort(models.Model):
    """Queues in one cohort lend each other their unused nominal quota."""

    name = models.SlugField(max_length=63, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Queue(models.Model):
    team = models.ForeignKey("scheduling.Team", on_delete=models.PROTECT, related_name="queues")
    name = models.SlugField(max_length=63, unique=True)
    cohort = models.ForeignKey(Cohort, on_delete=models.PROTECT, null=True, blank=True, related_name="queues")
    weight = models.FloatField(default=1.0)
    strategy = models.CharField(
        max_length=32,
        choices=[(s.value, s.name.replace("_", " ").title()) for s in QueueingStrategy],
        default=QueueingStrategy.BEST_EFFORT_FIFO.value,
    )
    preemption_policy = models.CharField(
        max_length=32,
        choices=[(p.value, p.name.replace("_", " ").title()) for p in PreemptionPolicy],
        default=PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM.value,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.CheckConstraint(condition=models.Q(weight__gt=0), name="queue_weight_positive")]

    def __str__(self) -> str:
        return self.name


class QueueQuota(models.Model):
    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey("scheduling.Flavor", on_delete=models.PROTECT, related_name="quotas")
    nominal = models.PositiveIntegerField()
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Null: may borrow all the cohort lends.")
    lending_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Null: lends all unused nominal quota.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "flavor"], name="quota_unique_queue_flavor"),
            models.CheckConstraint(condition=models.Q(nominal__gte=0), name="quota_nominal_non_negative"),
            models.CheckConstraint(
                condition=models.Q(lending_limit__isnull=True) | models.Q(lending_limit__lte=models.F("nominal")),
                name="quota_lending_within_nominal",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue}: {self.nominal} × {self.flavor}"


class QueueUsage(models.Model):
    """GPU-seconds a queue has used, decayed by the fair-share half-life at every reconcile pass, and the GPUs its
    pending jobs ask for, per flavor, as the last pass that saw a change left them."""

    queue = models.OneToOneField(Queue, on_delete=models.CASCADE, related_name="usage")
    usage_gpu_s = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(null=True, blank=True)
    pending_gpus = models.JSONField(default=dict, blank=True, help_text="{flavor: GPUs} of the queue's pending jobs.")

    def __str__(self) -> str:
        return f"{self.queue}: {self.usage_gpu_s:.0f} GPU-s"
