"""Priority classes: named priorities admins define, with the teams that may use them and a per-team GPU cap."""

from __future__ import annotations

from django.db import models


class PriorityClass(models.Model):
    """Like Kubernetes PriorityClass / Kueue WorkloadPriorityClass: jobs choose a class, the class gives the value.

    `max_gpus_per_team` caps the GPUs each team may hold at once in jobs of this class (Slurm QOS GrpTRES
    per account): a job that would go over it waits, with the reason named; null is no cap.
    """

    name = models.SlugField(max_length=63, unique=True)
    value = models.IntegerField(help_text="The priority jobs of this class get; higher goes first.")
    description = models.CharField(max_length=500, blank=True, default="")
    is_default = models.BooleanField(default=False, help_text="Jobs submitted without a class get this one.")
    is_for_all_teams = models.BooleanField(default=True, help_text="False: only the teams listed may use it.")
    teams = models.ManyToManyField("scheduling.Team", blank=True, related_name="priority_classes")
    max_gpus_per_team = models.PositiveIntegerField(null=True, blank=True, help_text="GPUs each team may run at this class at once; empty: no cap.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=models.Q(is_default=True), name="priority_class_one_default"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"
