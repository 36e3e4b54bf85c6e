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


class Rollup(models.Model):
    """GPU-seconds held and used in one bucket: a minute while recent, an hour once compacted. Team, queue and flavor
    are copied from the job, so use over time per team, queue or flavor is one query; rows outlive what they name
    (the foreign keys are nulled) so history stays whole."""

    start = models.DateTimeField()
    bucket_s = models.PositiveIntegerField()
    team = models.ForeignKey("scheduling.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    queue = models.ForeignKey("scheduling.Queue", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    flavor = models.ForeignKey("scheduling.Flavor", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    allocated_gpu_s = models.FloatField()
    used_gpu_s = models.FloatField()

    class Meta:
        abstract = True
        ordering = ["start"]


class UsageRollup(Rollup):
    """One job's use in one bucket."""

    job = models.ForeignKey("scheduling.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_rollups")

    class Meta(Rollup.Meta):
        indexes = [
            models.Index(fields=["start", "bucket_s"], name="rollup_start"),
            models.Index(fields=["team", "start"], name="rollup_team_start"),
            models.Index(fields=["queue", "start"], name="rollup_queue_start"),
            models.Index(fields=["flavor", "start"], name="rollup_flavor_start"),
            models.Index(fields=["job", "start"], name="rollup_job_start"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.used_gpu_s:.0f}/{self.allocated_gpu_s:.0f} GPU-s from {self.start:%H:%M}"


class QueueUsageRollup(Rollup):
    """The jobs of one queue in one bucket, per flavor: the fleet's use per team, queue and flavor read from a few rows
    a minute rather than one per running job. Written beside the job rollups."""

    class Meta(Rollup.Meta):
        indexes = [models.Index(fields=["start", "bucket_s"], name="queue_rollup_start")]

    def __str__(self) -> str:
        return f"queue {self.queue_id} {self.used_gpu_s:.0f}/{self.allocated_gpu_s:.0f} GPU-s from {self.start:%H:%M}"


class IdleJob(models.Model):
    """A job that held GPUs for the whole grace period and used less than the threshold of them, as the last usage
    collection found: the pages read these few rows instead of aggregating every running job's rollups."""

    job = models.OneToOneField("scheduling.Job", on_delete=models.CASCADE, primary_key=True, related_name="idle")
    mean_util_percent = models.FloatField()
    since = models.DateTimeField(
        help_text="The start of the first grace period in which the collection found the job idle, kept while it stays "
                  "idle: the work before it is the job's, the time after it is not (core.idle)."
    )

    def __str__(self) -> str:
        return f"job {self.job_id} idle at {self.mean_util_percent:.1f}%"

