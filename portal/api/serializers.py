"""Input and output serializers of the REST API (input: shapes and types, with the bounds the services define and
check again for every caller; services check the rest)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.api.explanation import ExplanationOut
from scheduling.core.model import JobState, PreemptionPolicy, QueueingStrategy
from scheduling.models import AuditAction, PlanStatus
from scheduling.services.common import (MAX_COMMENT_LENGTH, MAX_COUNT, MAX_JOB_NAME_LENGTH, MAX_NAME_LENGTH, MAX_PRIORITY,
                                        MAX_QUEUE_WEIGHT)
from scheduling.selectors.explanations import job_explanation_get
from scheduling.selectors.fleet import node_free_gpus

# --- input ----------------------------------------------------------------------------------------


class StrictMixin:
    """Unknown keys are errors, so a typo never silently does nothing; reported with the other fields' errors."""

    def to_internal_value(self, data):
        unknown = {key: ["unknown field"] for key in sorted(set(data) - set(self.fields))} if isinstance(data, dict) else {}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as error:
            if unknown and isinstance(error.detail, dict):
                raise serializers.ValidationError({**unknown, **error.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class PodSetIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=MAX_NAME_LENGTH, default="worker")
    count = serializers.IntegerField(min_value=1, max_value=MAX_COUNT)
    gpus_per_pod = serializers.IntegerField(min_value=1, max_value=MAX_COUNT)


class TopologyIn(StrictMixin, serializers.Serializer):
    required = serializers.CharField(max_length=MAX_NAME_LENGTH, allow_null=True, allow_blank=True, required=False, default=None)
    preferred = serializers.CharField(max_length=MAX_NAME_LENGTH, allow_null=True, allow_blank=True, required=False, default=None)


class JobSubmitIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=MAX_JOB_NAME_LENGTH)
    queue = serializers.CharField(max_length=MAX_NAME_LENGTH)
    flavor = serializers.CharField(max_length=MAX_NAME_LENGTH)
    pod_sets = PodSetIn(many=True, allow_empty=False)
    priority_class = serializers.CharField(max_length=MAX_NAME_LENGTH, required=False, allow_null=True, allow_blank=True, default=None,
                                           help_text="A priority class your team may use; omitted: the default class.")
    priority = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=-MAX_PRIORITY, max_value=MAX_PRIORITY,
                                        help_text="Admins only: a raw priority overriding the class's value.")
    topology = TopologyIn(required=False, default=dict)
    runtime_limit_s = serializers.IntegerField(min_value=1, max_value=MAX_COUNT, allow_null=True, required=False, default=None)
    checkpoint_interval_s = serializers.IntegerField(min_value=1, max_value=MAX_COUNT, allow_null=True, required=False, default=None)
    preemptible = serializers.BooleanField(default=True)
    pod_template = serializers.JSONField(required=False, allow_null=True, default=None, help_text=(
        "Optional Kubernetes pod template; on a Kubernetes cluster Gangway creates the gang as a suspended, gated Job."))


class QuotaIn(StrictMixin, serializers.Serializer):
    nominal = serializers.IntegerField(min_value=0, max_value=MAX_COUNT)
    borrowing_limit = serializers.IntegerField(min_value=0, max_value=MAX_COUNT, allow_null=True, required=False, default=None)
    lending_limit = serializers.IntegerField(min_value=0, max_value=MAX_COUNT, allow_null=True, required=False, default=None)


class QueueIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=MAX_NAME_LENGTH)
    team = serializers.CharField(max_length=MAX_NAME_LENGTH)
    cohort = serializers.CharField(max_length=MAX_NAME_LENGTH, allow_null=True, allow_blank=True, required=False, default=None)
    weight = serializers.FloatField(min_value=0.001, max_value=MAX_QUEUE_WEIGHT, default=1.0)
    strategy = serializers.ChoiceField([s.value for s in QueueingStrategy], default=QueueingStrategy.BEST_EFFORT_FIFO.value)
    preemption_policy = serializers.ChoiceField(
        [p.value for p in PreemptionPolicy], default=PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM.value
    )
    quotas = serializers.DictField(child=QuotaIn(), required=False, default=dict)


class QueuePatchIn(StrictMixin, serializers.Serializer):
    cohort = serializers.CharField(max_length=MAX_NAME_LENGTH, allow_null=True, allow_blank=True, required=False)
    weight = serializers.FloatField(min_value=0.001, max_value=MAX_QUEUE_WEIGHT, required=False)
    strategy = serializers.ChoiceField([s.value for s in QueueingStrategy], required=False)
    preemption_policy = serializers.ChoiceField([p.value for p in PreemptionPolicy], required=False)
    quotas = serializers.DictField(child=QuotaIn(), required=False)


class TeamIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=MAX_NAME_LENGTH)
    allotments = serializers.DictField(child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT), required=False, default=dict)


class TeamPatchIn(StrictMixin, serializers.Serializer):
    allotments = serializers.DictField(child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT), required=True)


class PriorityClassPatchIn(StrictMixin, serializers.Serializer):
    value = serializers.IntegerField(min_value=-MAX_PRIORITY, max_value=MAX_PRIORITY, required=False)
    description = serializers.CharField(max_length=500, allow_blank=True, required=False)
    is_default = serializers.BooleanField(required=False)
    teams = serializers.ListField(child=serializers.CharField(max_length=MAX_NAME_LENGTH), allow_null=True, required=False,
                                  help_text="Teams that may use the class; null: every team.")
    max_gpus_per_team = serializers.IntegerField(min_value=0, max_value=MAX_COUNT, allow_null=True, required=False,
                                                 help_text="GPUs each team may run at this class at once; null: no cap.")


class PriorityClassIn(PriorityClassPatchIn):
    name = serializers.CharField(max_length=MAX_NAME_LENGTH)
    value = serializers.IntegerField(min_value=-MAX_PRIORITY, max_value=MAX_PRIORITY)


class AuditQueryIn(serializers.Serializer):
    team = serializers.CharField(max_length=MAX_NAME_LENGTH, required=False)
    action = serializers.ChoiceField([a.value for a in AuditAction], required=False)
    actor = serializers.CharField(max_length=150, required=False)
    target_type = serializers.CharField(max_length=32, required=False)
    target_id = serializers.CharField(max_length=253, required=False)
    before = serializers.IntegerField(min_value=1, max_value=2**63 - 1, required=False, help_text="Records with a lower id (keyset).")
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=50)


class PreemptionQueryIn(serializers.Serializer):
    status = serializers.ChoiceField([status.value for status in PlanStatus], required=False,
                                     help_text="Plans in this status; omitted: every plan but superseded ones.")


class UsageQueryIn(serializers.Serializer):
    window_s = serializers.FloatField(
        min_value=60, max_value=7 * 24 * 3600, default=3600, help_text="The window the mean use is taken over, in seconds.",
        error_messages={"invalid": "must be a number of seconds", "min_value": "must be between 60 and 604800 seconds",
                        "max_value": "must be between 60 and 604800 seconds"},
    )


class QueueQueryIn(serializers.Serializer):
    team = serializers.CharField(max_length=MAX_NAME_LENGTH, required=False, help_text="Only this team's queues.")


class CommentIn(StrictMixin, serializers.Serializer):
    comment = serializers.CharField(max_length=MAX_COMMENT_LENGTH, allow_blank=True, required=False, default="")


# --- output ---------------------------------------------------------------------------------------


class TeamOut(serializers.Serializer):
    name = serializers.CharField()
    allotments = serializers.SerializerMethodField()
    queues = serializers.SerializerMethodField()
    namespaces = serializers.SerializerMethodField(help_text="Kubernetes namespaces the team owns (set by an admin).")

    def get_allotments(self, team) -> dict[str, int]:
        return {a.flavor.name: a.gpus for a in team.allotments.all()}

    def get_queues(self, team) -> list[str]:
        return sorted(q.name for q in team.queues.all())

    def get_namespaces(self, team) -> list[str]:
        return sorted(ns.name for ns in team.namespaces.all())


class QueueOut(serializers.Serializer):
    name = serializers.CharField()
    team = serializers.CharField(source="team.name")
    cohort = serializers.CharField(source="cohort.name", allow_null=True, default=None)
    weight = serializers.FloatField()
    strategy = serializers.CharField()
    preemption_policy = serializers.CharField()
    quotas = serializers.SerializerMethodField()
    gpus_in_use = serializers.DictField(child=serializers.IntegerField())
    usage_gpu_hours = serializers.SerializerMethodField()

    def get_quotas(self, queue) -> dict[str, dict]:
        return {
            q.flavor.name: {"nominal": q.nominal, "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit}
            for q in queue.quotas.all()
        }

    def get_usage_gpu_hours(self, queue) -> float:
        usage = getattr(queue, "usage", None)
        return round(usage.usage_gpu_s / 3600, 2) if usage else 0.0


class PodSetOut(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField()
    gpus_per_pod = serializers.IntegerField()


class JobListOut(serializers.Serializer):
    """A row of the job list: no explanation, placement or events (the detail has them)."""

    id = serializers.IntegerField()
    name = serializers.SerializerMethodField()
    owner = serializers.SerializerMethodField()
    is_visible_in_full = serializers.BooleanField()
    queue = serializers.CharField(source="queue.name")
    team = serializers.CharField(source="queue.team.name")
    flavor = serializers.CharField(source="flavor.name")
    state = serializers.ChoiceField([s.value for s in JobState])
    priority_class = serializers.CharField(source="priority_class.name", allow_null=True, default=None)
    priority = serializers.IntegerField()
    gpus = serializers.IntegerField()
    pod_sets = PodSetOut(many=True)
    topology = serializers.SerializerMethodField()
    runtime_limit_s = serializers.IntegerField(allow_null=True)
    checkpoint_interval_s = serializers.IntegerField(allow_null=True)
    preemptible = serializers.BooleanField(source="is_preemptible")
    is_borrowing = serializers.BooleanField()
    evictions = serializers.IntegerField()
    submitted_at = serializers.DateTimeField()
    admitted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    why = serializers.CharField(allow_null=True, help_text="A pending job's reason in one line (the detail explains it in full).")

    def get_name(self, job) -> str | None:
        return job.name if job.is_visible_in_full else None

    def get_owner(self, job) -> str | None:
        return job.owner.username if job.is_visible_in_full else None

    def get_topology(self, job) -> dict:
        return {"required": job.topology_required or None, "preferred": job.topology_preferred or None}


class PlacementOut(serializers.Serializer):
    pod_set = serializers.CharField(source="pod_set.name")
    index = serializers.IntegerField(source="pod_index")
    node = serializers.CharField(source="node.name")
    gpus = serializers.IntegerField()


class JobEventOut(serializers.Serializer):
    from_state = serializers.CharField()
    to_state = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    actor = serializers.SerializerMethodField()
    at = serializers.DateTimeField(source="created_at")

    def get_actor(self, event) -> str | None:
        """Null for the reconciler, and on another team's job (scheduling.permissions.restrict_event_actors)."""
        return getattr(event, "actor_username", None)


class JobDetailOut(JobListOut):
    placement = PlacementOut(many=True, source="placements.all")
    explanation = serializers.SerializerMethodField()

    @extend_schema_field(ExplanationOut(allow_null=True))
    def get_explanation(self, job) -> dict | None:
        """Why it is pending (the ordered isolation, fixes, estimated start) and its live place in the queue."""
        explanation = job_explanation_get(job=job)
        return None if explanation is None else ExplanationOut(explanation).data

    events = JobEventOut(many=True, source="events.all")
    workload = serializers.SerializerMethodField(help_text="The gang's workload (Job, JobSet, PyTorchJob) in a Kubernetes cluster, if any.")

    def get_workload(self, job) -> dict | None:
        if not job.cluster_name or not job.is_visible_in_full:
            return None
        return {"kind": job.cluster_kind, "namespace": job.cluster_namespace, "name": job.cluster_name}


class NodeOut(serializers.Serializer):
    name = serializers.CharField()
    flavor = serializers.CharField(source="flavor.name")
    capacity_gpus = serializers.IntegerField()
    allocatable_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    external_gpus = serializers.IntegerField()
    free_gpus = serializers.SerializerMethodField()
    labels = serializers.DictField(child=serializers.CharField())
    taints = serializers.ListField(child=serializers.DictField())
    is_ready = serializers.BooleanField()
    is_unschedulable = serializers.BooleanField()

    def get_free_gpus(self, node) -> int:
        return node_free_gpus(node)


class TotalsOut(serializers.Serializer):
    nodes = serializers.IntegerField()
    capacity_gpus = serializers.IntegerField()
    allocatable_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    external_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    whole_free_nodes = serializers.IntegerField()
    unavailable_nodes = serializers.IntegerField()


class RackOut(TotalsOut):
    name = serializers.CharField()
    flavor = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField())


class FleetOut(serializers.Serializer):
    topology = serializers.ListField(child=serializers.CharField())
    totals = TotalsOut()
    by_flavor = serializers.DictField(child=TotalsOut())
    racks = RackOut(many=True)
    policy = serializers.DictField(child=serializers.CharField(), help_text="The scheduling policy in force.")


class VictimOut(serializers.Serializer):
    job = serializers.IntegerField(source="job_id")
    queue = serializers.CharField(source="job.queue.name")
    gpus = serializers.IntegerField()
    cost_gpu_hours = serializers.FloatField()
    idle_since = serializers.DateTimeField(source="job.idle.since", allow_null=True, default=None,
                                          help_text="Flagged idle since then (the usage collection's IdleJob): taken first, it "
                                                    "loses no work since; null for a working victim.")


class PreemptionOut(serializers.Serializer):
    id = serializers.IntegerField()
    job = serializers.IntegerField(source="job_id")
    queue = serializers.CharField(source="job.queue.name")
    status = serializers.CharField()
    reason = serializers.CharField()
    domain = serializers.CharField()
    needs_approval = serializers.BooleanField()
    cost_gpu_hours = serializers.FloatField()
    teams_affected = serializers.ListField(child=serializers.CharField())
    victims = VictimOut(many=True, source="victim_rows.all")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    decided_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class PriorityClassOut(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.IntegerField()
    description = serializers.CharField()
    is_default = serializers.BooleanField()
    teams = serializers.SerializerMethodField()
    max_gpus_per_team = serializers.IntegerField(allow_null=True)

    def get_teams(self, pc) -> list[str] | None:
        return None if pc.is_for_all_teams else sorted(t.name for t in pc.teams.all())


class AuditRecordOut(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField(source="actor_name")
    action = serializers.CharField()
    target_type = serializers.CharField()
    target_id = serializers.CharField()
    team = serializers.CharField(source="team.name", allow_null=True, default=None)
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    comment = serializers.CharField()


class AuditPageOut(serializers.Serializer):
    results = AuditRecordOut(many=True)
    next_before = serializers.IntegerField(allow_null=True, help_text="Pass as `before` for the next (older) page.")


class TeamUsageOut(serializers.Serializer):
    team = serializers.CharField()
    allocated_gpus = serializers.FloatField(help_text="GPUs held, averaged over the window.")
    used_gpus = serializers.FloatField(help_text="Utilisation-weighted GPUs, averaged over the window (never above allocated).")
    use_percent = serializers.FloatField(allow_null=True)
    idle_gpus = serializers.IntegerField()


class IdleAllocationOut(serializers.Serializer):
    job_id = serializers.IntegerField()
    job_name = serializers.CharField(allow_null=True)
    team = serializers.CharField()
    gpus = serializers.IntegerField()
    mean_util_percent = serializers.FloatField()


class UsageOut(serializers.Serializer):
    window_s = serializers.FloatField()
    collections = serializers.IntegerField()
    idle_threshold_percent = serializers.FloatField()
    idle_grace_s = serializers.FloatField()
    teams = TeamUsageOut(many=True)
    idle = IdleAllocationOut(many=True)
