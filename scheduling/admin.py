"""Django admin registrations for the scheduling domain."""

from django.contrib import admin

from scheduling import models


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0


class AllotmentInline(admin.TabularInline):
    model = models.TeamAllotment
    extra = 0


class NamespaceInline(admin.TabularInline):
    model = models.TeamNamespace
    extra = 0


@admin.register(models.Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    inlines = [AllotmentInline, NamespaceInline, MembershipInline]


@admin.register(models.Flavor)
class FlavorAdmin(admin.ModelAdmin):
    list_display = ["name"]


class QuotaInline(admin.TabularInline):
    model = models.QueueQuota
    extra = 0


@admin.register(models.Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "cohort", "weight", "strategy", "preemption_policy"]
    list_filter = ["team", "cohort"]
    inlines = [QuotaInline]


admin.site.register(models.Cohort)
admin.site.register(models.QueueUsage)
admin.site.register(models.FleetSettings)
admin.site.register(models.ReconcileState)
admin.site.register(models.SimulatedWorkload)


@admin.register(models.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "flavor", "capacity_gpus", "allocatable_gpus", "external_gpus", "is_ready", "is_unschedulable"]
    list_filter = ["flavor", "is_ready", "is_unschedulable"]
    search_fields = ["name"]


class PodSetInline(admin.TabularInline):
    model = models.PodSet
    extra = 0


class EventInline(admin.TabularInline):
    model = models.JobEvent
    extra = 0
    readonly_fields = ["from_state", "to_state", "actor", "reason", "message", "created_at"]


@admin.register(models.Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "queue", "owner", "state", "priority", "gpus", "submitted_at"]
    list_filter = ["state", "queue"]
    search_fields = ["name"]
    raw_id_fields = ["preempted_by", "owner"]
    inlines = [PodSetInline, EventInline]


class VictimInline(admin.TabularInline):
    model = models.PreemptionVictim
    extra = 0
    raw_id_fields = ["job"]


@admin.register(models.PreemptionPlan)
class PreemptionPlanAdmin(admin.ModelAdmin):
    list_display = ["id", "job", "status", "needs_approval", "cost_gpu_hours", "created_at"]
    list_filter = ["status", "needs_approval"]
    raw_id_fields = ["job"]
    inlines = [VictimInline]


@admin.register(models.WorkloadRejection)
class WorkloadRejectionAdmin(admin.ModelAdmin):
    list_display = ("namespace", "name", "queue", "reason", "message", "last_seen_at")
    list_filter = ("reason",)
    search_fields = ("namespace", "name", "queue")


@admin.register(models.GpuUsageSample)
class GpuUsageSampleAdmin(admin.ModelAdmin):
    list_display = ("at", "node_name", "gpu", "job", "team", "util_percent", "fb_used_mib")
    list_filter = ("team",)
    raw_id_fields = ("job",)
