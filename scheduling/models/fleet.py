"""GPU nodes, the fleet's topology levels, the reconcile singleton row, and the log of rows changed since a pass read them."""

from __future__ import annotations

from django.db import models


class Node(models.Model):
    name = models.CharField(max_length=253, unique=True)
    flavor = models.ForeignKey("scheduling.Flavor", on_delete=models.PROTECT, related_name="nodes")
    capacity_gpus = models.PositiveIntegerField()
    allocatable_gpus = models.PositiveIntegerField(help_text="Below capacity when the device plugin reports unhealthy devices.")
    labels = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    is_ready = models.BooleanField(default=True)
    is_unschedulable = models.BooleanField(default=False, help_text="Cordoned.")
    external_gpus = models.PositiveIntegerField(default=0, help_text="GPUs held by pods Gangway does not manage.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(allocatable_gpus__lte=models.F("capacity_gpus")), name="node_allocatable_within_capacity"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class FleetSettings(models.Model):
    """Singleton (pk=1): the node label keys that form the topology, coarsest first."""

    topology_levels = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "fleet settings"

    @classmethod
    def load(cls) -> "FleetSettings":
        settings, _ = cls.objects.get_or_create(pk=1)
        return settings

    def __str__(self) -> str:
        return " → ".join(self.topology_levels) or "(no topology levels)"


class ReconcileState(models.Model):
    """Singleton (pk=1) locked for update by every reconcile pass, so two passes never interleave."""

    last_pass_at = models.DateTimeField(null=True, blank=True)
    passes = models.PositiveBigIntegerField(default=0)
    lost_races = models.PositiveBigIntegerField(default=0, help_text="Decisions not written because the job changed during the pass.")
    cluster_errors = models.PositiveBigIntegerField(default=0, help_text="Releases and suspensions the cluster refused (retried).")
    last_pass_phases_s = models.JSONField(default=dict, blank=True, help_text="Seconds of each step of the last pass.")
    fleet_summary = models.JSONField(
        default=dict, blank=True, help_text="Totals per flavor and rack and the free-GPU heatmap, as the last pass that saw them change left them.")
    explanations_version = models.PositiveBigIntegerField(
        default=0, help_text="Bumped by every pass that writes explanations: a process that remembers an older version reads them again.")

    def __str__(self) -> str:
        return f"reconcile pass {self.passes} at {self.last_pass_at}"


class RowChange(models.Model):
    """A job (with its pod sets and placements) or node row inserted, changed or deleted since a reconcile pass last
    read it: written by database triggers (migration 0009), so no write path can forget to, and stamped with the
    number of the pass that first reads it. A pass re-reads only the rows changed since its process's last pass
    (scheduling.snapshot_cache). Job updates are logged only for the columns the snapshot reads (JOB_COLUMNS)."""

    kind = models.CharField(max_length=8, help_text="\"job\" (a job, its pod sets or placements) or \"node\".")
    row_id = models.BigIntegerField()
    pass_number = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["pass_number"], name="rowchange_pass")]

    def __str__(self) -> str:
        return f"{self.kind} {self.row_id} (pass {self.pass_number})"
