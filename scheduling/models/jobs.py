"""Jobs (gangs), their pod sets, the placement of every pod, why pending ones wait, and the audit trail of state changes."""

from __future__ import annotations

import enum

from django.conf import settings
from django.db import models

from scheduling.core.model import JobState

JOB_STATE_CHOICES = [(s.value, s.name.title()) for s in JobState]
HOLDING_STATES = [s.value for s in JobState if s.holds_gpus]
JOB_QUEUE_ORDER = ("-priority", "submitted_at", "id")
"""A queue's pending jobs in the core's order (core.model.Job.queue_order), as the job_pending_order index walks them."""


class Job(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    queue = models.ForeignKey("scheduling.Queue", on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=200)
    flavor = models.ForeignKey("scheduling.Flavor", on_delete=models.PROTECT, related_name="jobs")
    priority = models.IntegerField(default=0)
    priority_class = models.ForeignKey("scheduling.PriorityClass", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    topology_required = models.CharField(max_length=63, blank=True, default="")
    topology_preferred = models.CharField(max_length=63, blank=True, default="")
    runtime_limit_s = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_interval_s = models.PositiveIntegerField(null=True, blank=True)
    is_preemptible = models.BooleanField(default=True)
    tolerations = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=16, choices=JOB_STATE_CHOICES, default=JobState.PENDING.value)
    gpus = models.PositiveIntegerField(default=0, help_text="Total GPUs of the gang (sum over pod sets).")

    submitted_at = models.DateTimeField()
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    admission_generation = models.PositiveIntegerField(default=0)
    applied_generation = models.PositiveIntegerField(default=0, help_text="Last admission generation released on the cluster.")
    ready_pods = models.PositiveIntegerField(default=0)
    evictions = models.PositiveIntegerField(default=0)
    backoff_until = models.DateTimeField(null=True, blank=True)
    preempted_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    is_borrowing = models.BooleanField(default=False)
    attained_gpu_s = models.FloatField(
        default=0.0, help_text="GPU-seconds run in earlier runs (before a preemption or eviction): the attained service."
    )
    explanation_key = models.CharField(
        max_length=48, blank=True, default="",
        help_text="Key of the stored explanation of a pending job (Explanation): shared by the jobs of one shape.")
    estimated_start = models.DateTimeField(null=True, blank=True, help_text="When the forecast expects a pending job to start.")
    estimated_at = models.DateTimeField(null=True, blank=True, help_text="When that forecast ran.")

    # Where the gang lives in a Kubernetes cluster: a discovered Job, or one Gangway created from `pod_template`.
    cluster_namespace = models.CharField(max_length=63, blank=True, default="")
    cluster_name = models.CharField(max_length=63, blank=True, default="", help_text="Name of the workload (a Job, JobSet or PyTorchJob); empty on the simulated cluster.")
    cluster_kind = models.CharField(max_length=32, blank=True, default="Job", help_text="Kind of the workload: Job, JobSet or PyTorchJob.")
    pod_template = models.JSONField(null=True, blank=True, help_text="Pod template of a job submitted through Gangway; created in the cluster as a suspended Job.")

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_namespace", "cluster_name"], condition=~models.Q(cluster_name=""), name="job_unique_cluster_workload"
            ),
        ]
        indexes = [
            # The reconcile pass reads pending jobs per queue in priority-then-FIFO order.
            models.Index(fields=["state", "queue", *JOB_QUEUE_ORDER], name="job_pending_order"),
            models.Index(fields=["owner", "state"], name="job_owner_state"),
            # The job list, newest first, unfiltered and by each filter (keyset pages walk these).
            models.Index(fields=["-submitted_at", "-id"], name="job_list_order"),
            models.Index(fields=["state", "-submitted_at", "-id"], name="job_list_state"),
            models.Index(fields=["queue", "-submitted_at", "-id"], name="job_list_queue"),
            models.Index(fields=["owner", "-submitted_at", "-id"], name="job_list_owner"),
            # Released gangs (observed and suspended by every pass): a few thousand of 600,000 rows.
            models.Index(fields=["state"], condition=models.Q(applied_generation__gt=0), name="job_released"),
            # Today's admissions (the queues page's median wait).
            models.Index(fields=["admitted_at"], condition=models.Q(admitted_at__isnull=False), name="job_admitted_at"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def pods(self) -> int:
        return sum(pod_set.count for pod_set in self.pod_sets.all())

    @property
    def are_pods_ready(self) -> bool:
        return self.ready_pods > 0 and self.ready_pods >= self.pods


class PodSet(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pod_sets")
    name = models.CharField(max_length=63)
    count = models.PositiveIntegerField()
    gpus_per_pod = models.PositiveIntegerField(help_text="0 for a role without GPUs (a JobSet's launcher) in a GPU gang.")

    class Meta:
        ordering = ["job", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="podset_unique_job_name"),
            models.CheckConstraint(condition=models.Q(count__gt=0), name="podset_count_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.count} × {self.gpus_per_pod} GPUs"


class Placement(models.Model):
    """One pod of an admitted gang bound to a node. Rows of the current admission only."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="placements")
    pod_set = models.ForeignKey(PodSet, on_delete=models.CASCADE, related_name="placements")
    pod_index = models.PositiveIntegerField()
    node = models.ForeignKey("scheduling.Node", on_delete=models.CASCADE, related_name="placements")
    gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["job", "pod_set", "pod_index"]
        constraints = [models.UniqueConstraint(fields=["job", "pod_set", "pod_index"], name="placement_unique_pod")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.pod_set.name}-{self.pod_index} → {self.node.name}"


class EventReason(enum.StrEnum):
    """Why a job changed state: JobEvent.reason, machine-readable (the message carries the words and numbers)."""

    SUBMITTED = "submitted"
    DISCOVERED = "discovered"
    """A suspended workload found in the cluster became a job."""
    ADMITTED = "admitted"
    PODS_READY = "pods_ready"
    PODS_NOT_READY = "pods_not_ready"
    """Evicted: the gang's pods were not all ready within the readiness timeout."""
    PREEMPTED = "preempted"
    REQUEUED = "requeued"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WORKLOAD_DELETED = "workload_deleted"


class JobEvent(models.Model):
    """A state change of a job: who (null actor = the reconciler), why, when."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=16, choices=JOB_STATE_CHOICES, blank=True, default="")
    to_state = models.CharField(max_length=16, choices=JOB_STATE_CHOICES)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    reason = models.CharField(max_length=64)
    message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        # The history page: admissions and preemptions of the last days.
        indexes = [models.Index(fields=["to_state", "created_at"], name="jobevent_state_created")]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.from_state or '∅'} → {self.to_state} ({self.reason})"


class HistoryDay(models.Model):
    """One ended UTC day of the history page (per queue: admissions, preemptions, wait percentiles), computed once from
    its job events and kept: the events of an ended day do not change. Shared by every web worker, restarts included."""

    day = models.DateField(primary_key=True)
    rows = models.JSONField(help_text="[{queue, admissions, preemptions, p50_wait_s, p95_wait_s}], by queue name")

    def __str__(self) -> str:
        return f"history of {self.day}"


class SubmissionHour(models.Model):
    """One settled UTC hour of submissions, counted for the gaming signals (selectors.splitting): its teams' tallies are
    its SubmissionTally rows (none for a team that submitted nothing). Counted once from the hour's jobs and kept: a
    submission is stamped when it is written and its team, size and time do not change. A job found in the cluster with
    an older creation time forgets the hours it falls in (services.cluster), so they are counted again."""

    start = models.DateTimeField(primary_key=True)

    def __str__(self) -> str:
        return f"submissions of the hour from {self.start:%Y-%m-%d %H:%M}"


class SubmissionTally(models.Model):
    """A team's submissions in a settled hour: jobs and their GPUs, and the split pieces among them and theirs."""

    hour = models.ForeignKey(SubmissionHour, on_delete=models.CASCADE, related_name="tallies")
    team = models.ForeignKey("scheduling.Team", on_delete=models.CASCADE, related_name="+")
    jobs = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    split_jobs = models.PositiveIntegerField()
    split_gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "team"], name="submission_tally_hour_team")]
        # A team's page sums its own hours of the week.
        indexes = [models.Index(fields=["team", "hour"], name="submission_tally_team_hour")]

    def __str__(self) -> str:
        return f"team {self.team_id}, hour {self.hour_id}: {self.jobs} jobs, {self.split_jobs} split"


class Explanation(models.Model):
    """Why pending jobs wait, as the reconcile pass last explained it: one row per distinct answer, so 100,000 jobs
    of a few hundred shapes are a few hundred rows. Jobs of one shape share a row ("s:" + a hash of the shape);
    a job explained on its own (its queue's head, one in backoff or behind a reservation) has its own ("j:" + id).
    A row is rewritten only when its fingerprint changes; rows no pending job refers to are deleted."""

    key = models.CharField(max_length=48, primary_key=True)
    data = models.JSONField()
    fingerprint = models.CharField(max_length=16)
    checked_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key}: {self.data.get('headline') or self.data.get('summary', '')}"

