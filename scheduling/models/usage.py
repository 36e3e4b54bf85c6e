"""GPU use as measured (DCGM via Prometheus, or simulated), per GPU, node, job and team; and cluster workloads Gangway refused."""

from __future__ import annotations

from django.db import models


class GpuUsageSample(models.Model):
    """One GPU at one collection time. Job and team are null for GPUs no Gangway job holds."""

    at = models.DateTimeField(db_index=True)
    node_name = models.CharField(max_length=253)
    gpu = models.CharField(max_length=64)
    job = models.ForeignKey("scheduling.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_samples")
    team = models.ForeignKey("scheduling.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_samples")
    util_percent = models.FloatField()
    fb_used_mib = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "node_name", "gpu"]
        indexes = [
            models.Index(fields=["team", "at"], name="usage_team_at"),
            models.Index(fields=["job", "at"], name="usage_job_at"),
        ]

    def __str__(self) -> str:
        return f"{self.node_name}/{self.gpu} {self.util_percent:.0f}% at {self.at:%H:%M}"


class WorkloadRejection(models.Model):
    """A labelled workload in the cluster that Gangway could not take as a job (unknown queue, no flavor…)."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue = models.CharField(max_length=63, blank=True, default="")
    reason = models.CharField(max_length=64)
    message = models.TextField()
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="rejection_unique_workload")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}: {self.message}"
