"""Workloads released on the simulated cluster, shared by the web, worker and beat processes."""

from __future__ import annotations

from django.db import models


class SimulatedWorkload(models.Model):
    job = models.OneToOneField("scheduling.Job", on_delete=models.CASCADE, related_name="simulated_workload")
    generation = models.PositiveIntegerField()
    released_at = models.FloatField(help_text="Epoch seconds of the release on the simulated clock.")
    duration_s = models.FloatField()
    pods = models.PositiveIntegerField(default=0)
    releases = models.PositiveIntegerField(default=1, help_text="Times a new generation was released: replays of the same one do not count.")

    def __str__(self) -> str:
        return f"job {self.job_id} gen {self.generation}"
