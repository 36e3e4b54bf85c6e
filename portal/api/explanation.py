"""The explanation's contract in the API: core.explain's JSON (facts.Explanation.to_dict) with what the selector adds
(the live place in the queue, the estimated start), declared field by field so the OpenAPI schema names it."""

from __future__ import annotations

from rest_framework import serializers


class QuotaBorrowerOut(serializers.Serializer):
    queue = serializers.CharField()
    gpus = serializers.IntegerField()


class QuotaFactsOut(serializers.Serializer):
    queue = serializers.CharField()
    flavor = serializers.CharField()
    fits = serializers.BooleanField()
    limit = serializers.CharField(allow_null=True, help_text="The limit that blocks (a QuotaLimit), null when the job fits.")
    requested = serializers.IntegerField()
    nominal = serializers.IntegerField()
    in_use = serializers.IntegerField()
    borrowing_limit = serializers.IntegerField(allow_null=True)
    cohort = serializers.CharField(allow_null=True)
    borrowable_from_cohort = serializers.IntegerField()
    room = serializers.IntegerField()
    short_by = serializers.IntegerField()
    lent_out = serializers.IntegerField()
    borrowers = QuotaBorrowerOut(many=True)
    message = serializers.CharField(allow_blank=True)


class DomainFactsOut(serializers.Serializer):
    level = serializers.CharField()
    key = serializers.CharField()
    free_gpus = serializers.IntegerField()
    whole_free_nodes = serializers.IntegerField()


class ScatteredRackOut(serializers.Serializer):
    rack = serializers.CharField()
    gpus = serializers.IntegerField()


class FragmentationFactsOut(serializers.Serializer):
    is_fragmented = serializers.BooleanField()
    scattered_gpus = serializers.IntegerField()
    partly_used_nodes = serializers.IntegerField()
    racks = ScatteredRackOut(many=True)


class FitFactsOut(serializers.Serializer):
    fits = serializers.BooleanField()
    needed_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    node_gpus = serializers.IntegerField()
    whole_nodes_needed = serializers.IntegerField()
    whole_free_nodes = serializers.IntegerField()
    required_level = serializers.CharField(allow_null=True)
    largest_domain = DomainFactsOut(allow_null=True)
    fragmentation = FragmentationFactsOut()
    message = serializers.CharField(allow_blank=True)


class NodeFactsOut(serializers.Serializer):
    total = serializers.IntegerField()
    eligible = serializers.IntegerField()
    pod_gpus = serializers.IntegerField()
    reasons = serializers.DictField(child=serializers.IntegerField(), help_text="Node reason (a NodeReason) → nodes.")
    message = serializers.CharField(allow_blank=True)


class BrokenNodeOut(serializers.Serializer):
    name = serializers.CharField()
    capacity = serializers.IntegerField()
    allocatable = serializers.IntegerField()
    problem = serializers.CharField()


class HealthFactsOut(serializers.Serializer):
    nodes = BrokenNodeOut(many=True)
    count = serializers.IntegerField()
    missing_gpus = serializers.IntegerField()
    message = serializers.CharField(allow_blank=True)


class FixVictimOut(serializers.Serializer):
    job = serializers.IntegerField()
    queue = serializers.CharField()
    team = serializers.CharField()
    gpus = serializers.IntegerField()
    rule = serializers.CharField(help_text="Why it is a victim (a VictimRule): idle (flagged idle, taken first), reclaim (its "
                                           "queue borrows from the cohort), within_queue (lower priority in the job's queue) or "
                                           "attained_service (the job's queue, served a whole level longer).")
    cost_gpu_hours = serializers.FloatField(help_text="Its displacement: the work it loses plus its restart.")
    lost_work_gpu_hours = serializers.FloatField(help_text="Work since its last checkpoint; time spent idle is none.")
    idle_since = serializers.CharField(allow_null=True, help_text="For an idle victim, since when it has been idle.")


class FixOut(serializers.Serializer):
    action = serializers.CharField(help_text="An Action: wait, borrow, raise_quota, uncordon, tolerate, drain_node, defragment, preempt, …")
    cost_gpu_hours = serializers.FloatField()
    teams_affected = serializers.ListField(child=serializers.CharField())
    needs_approval = serializers.BooleanField()
    detail = serializers.CharField()
    jobs = serializers.ListField(child=serializers.IntegerField())
    nodes = serializers.ListField(child=serializers.CharField())
    victims = FixVictimOut(many=True, help_text="A preempt fix's victims, each with the rule that chose it; empty for other fixes.")
    declined = serializers.CharField(default="", help_text="For a preempt fix the scheduler could run but does not now, "
                                                           "why not (it would not pay, GPUs come back soon on their own, "
                                                           "it waits for a checkpoint); empty otherwise.")


class JobAheadOut(serializers.Serializer):
    id = serializers.IntegerField()
    gpus = serializers.IntegerField()
    priority = serializers.IntegerField()


class QueuePositionOut(serializers.Serializer):
    in_queue = serializers.IntegerField(help_text="1 for the job next in its queue's order.")
    ahead = JobAheadOut(many=True)
    gpus_ahead = serializers.IntegerField()


class ExplanationOut(serializers.Serializer):
    """Why a pending job waits: the blocking level, the facts of every level, the fixes ranked by displacement, its
    live place in the queue and the forecast's estimated start."""

    blocking = serializers.CharField(allow_null=True, help_text="quota, fit, nodes, health, order or priority_class; null: starts next pass.")
    headline = serializers.CharField(allow_blank=True)
    summary = serializers.CharField()
    quota = QuotaFactsOut()
    fit = FitFactsOut(allow_null=True)
    nodes = NodeFactsOut(allow_null=True)
    health = HealthFactsOut(allow_null=True)
    order = serializers.CharField(allow_blank=True)
    attained_service = serializers.CharField(allow_blank=True)
    never_fits = serializers.BooleanField()
    position = QueuePositionOut()
    fixes = FixOut(many=True)
    checked_at = serializers.FloatField(help_text="When the explanation was computed (epoch seconds).")
    estimated_start = serializers.CharField(allow_null=True)
    estimated_at = serializers.CharField(allow_null=True)
