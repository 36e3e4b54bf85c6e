"""Input and output serializers of the REST API (input: shapes and types; services check the rest)."""

from __future__ import annotations

from rest_framework import serializers

from scheduling.core.model import JobState, PreemptionPolicy, QueueingStrategy
from scheduling.services.common import MAX_COUNT, MAX_QUEUE_WEIGHT
from scheduling.selectors.explanations import job_explanation_get
from scheduling.selectors.fleet import node_free_gpus

# --- input ----------------------------------------------------------------------------------------


class StrictMixin:
    """Unknown keys are errors, so a typo never silently does nothing."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({key: ["unknown field"] for key in sorted(unknown)})
        return super().to_internal_value(data)


class PodSetIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=63, default="worker")
    count = serializers.IntegerField(min_value=1, max_value=MAX_COUNT)
    gpus_per_pod = serializers.IntegerField(min_value=1, max_value=MAX_COUNT)


class TopologyIn(StrictMixin, serializers.Serializer):
    required = serializers.CharField(max_length=63, allow_null=True, allow_blank=True, required=False, default=None)
    preferred = serializers.CharField(max_length=63, allow_null=True, allow_blank=True, required=False, default=None)


class JobSubmitIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=200)
    queue = serializers.CharField(max_length=63)
    flavor = serializers.CharField(max_length=63)
    pod_sets = PodSetIn(many=True, allow_empty=False)
    priority = serializers.IntegerField(default=0, min_value=-1_000_000, max_value=1_000_000)
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
    name = serializers.CharField(max_length=63)
    team = serializers.CharField(max_length=63)
    cohort = serializers.CharField(max_length=63, allow_null=True, allow_blank=True, required=False, default=None)
    weight = serializers.FloatField(min_value=0.001, max_value=MAX_QUEUE_WEIGHT, default=1.0)
    strategy = serializers.ChoiceField([s.value for s in QueueingStrategy], default=QueueingStrategy.BEST_EFFORT_FIFO.value)
    preemption_policy = serializers.ChoiceField(
        [p.value for p in PreemptionPolicy], default=PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM.value
    )
    quotas = serializers.DictField(child=QuotaIn(), required=False, default=dict)


class QueuePatchIn(StrictMixin, serializers.Serializer):
    cohort = serializers.CharField(max_length=63, allow_null=True, allow_blank=True, required=False)
    weight = serializers.FloatField(min_value=0.001, max_value=MAX_QUEUE_WEIGHT, required=False)
    strategy = serializers.ChoiceField([s.value for s in QueueingStrategy], required=False)
    preemption_policy = serializers.ChoiceField([p.value for p in PreemptionPolicy], required=False)
    quotas = serializers.DictField(child=QuotaIn(), required=False)


class TeamIn(StrictMixin, serializers.Serializer):
    name = serializers.CharField(max_length=63)
    allotments = serializers.DictField(child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT), required=False, default=dict)


class TeamPatchIn(StrictMixin, serializers.Serializer):
    allotments = serializers.DictField(child=serializers.IntegerField(min_value=0, max_value=MAX_COUNT), required=True)


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


class JobOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.SerializerMethodField()
    owner = serializers.SerializerMethodField()
    is_visible_in_full = serializers.BooleanField()
    queue = serializers.CharField(source="queue.name")
    team = serializers.CharField(source="queue.team.name")
    flavor = serializers.CharField(source="flavor.name")
    state = serializers.ChoiceField([s.value for s in JobState])
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
    explanation = serializers.SerializerMethodField()

    def get_name(self, job) -> str | None:
        return job.name if job.is_visible_in_full else None

    def get_owner(self, job) -> str | None:
        return job.owner.username if job.is_visible_in_full else None

    def get_topology(self, job) -> dict:
        return {"required": job.topology_required or None, "preferred": job.topology_preferred or None}

    def get_explanation(self, job) -> dict | None:
        return job.explanation or None if job.state == JobState.PENDING else None


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
        return event.actor.username if event.actor else None


class JobDetailOut(JobOut):
    placement = PlacementOut(many=True, source="placements.all")

    def get_explanation(self, job) -> dict | None:
        """Why it is pending (the ordered isolation, fixes, estimated start) and its live place in the queue."""
        return job_explanation_get(job=job)

    events = JobEventOut(many=True, source="events.all")
    workload = serializers.SerializerMethodField(help_text="The gang's batch/v1 Job in a Kubernetes cluster, if any.")

    def get_workload(self, job) -> dict | None:
        if not job.cluster_name or not job.is_visible_in_full:
            return None
        return {"namespace": job.cluster_namespace, "name": job.cluster_name}


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
