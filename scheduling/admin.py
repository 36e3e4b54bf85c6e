"""Django admin registrations for the scheduling domain.

Jobs, their events and placements (admissions) and the audit log are read-only here: states and
admission generations change only through the services and the reconcile pass, and history is never
deleted. Quotas and allotments are shown, not edited: their changes go through the pages and the API,
which record them in the audit log. Priority classes are edited here through their services (audited).
"""

from django.contrib import admin

from scheduling import models, services


class ReadOnlyAdminMixin:
    """View only: no add, change or delete."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0


class AllotmentInline(ReadOnlyAdminMixin, admin.TabularInline):
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


class QuotaInline(ReadOnlyAdminMixin, admin.TabularInline):
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


class PodSetInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = models.PodSet
    extra = 0


class PlacementInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = models.Placement
    extra = 0
    fields = ["pod_set", "pod_index", "node", "gpus"]


class EventInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = models.JobEvent
    extra = 0
    fields = ["created_at", "from_state", "to_state", "actor", "reason", "message"]
    readonly_fields = fields


@admin.register(models.Job)
class JobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "name", "queue", "owner", "state", "priority", "gpus", "submitted_at"]
    list_filter = ["state", "queue"]
    search_fields = ["name"]
    raw_id_fields = ["preempted_by", "owner"]
    inlines = [PodSetInline, PlacementInline, EventInline]


@admin.register(models.JobEvent)
class JobEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "job", "from_state", "to_state", "reason", "actor"]
    list_filter = ["reason", "to_state"]
    raw_id_fields = ["job"]


@admin.register(models.Placement)
class PlacementAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["job", "pod_set", "pod_index", "node", "gpus"]
    raw_id_fields = ["job"]


@admin.register(models.AuditRecord)
class AuditRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["at", "actor_name", "action", "target_type", "target_id", "team", "comment"]
    list_filter = ["action", "team"]
    search_fields = ["actor_name", "target_id", "comment"]


@admin.register(models.PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    """Saved through priority_class_create / _update, so every change is validated and audited."""

    list_display = ["name", "value", "is_default", "is_for_all_teams", "max_gpus_per_team", "description"]
    filter_horizontal = ["teams"]

    def get_readonly_fields(self, request, obj=None):
        return ["name"] if obj is not None else []

    def has_delete_permission(self, request, obj=None):
        return False  # jobs keep their class; retire one by listing no teams

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        fields = {
            "value": data["value"], "description": data["description"], "is_default": data["is_default"],
            "teams": None if data["is_for_all_teams"] else [team.name for team in data["teams"]],
            "max_gpus_per_team": data["max_gpus_per_team"],
        }
        if change:
            saved = services.priority_class_update(actor=request.user, name=obj.name, **fields)
        else:
            saved = services.priority_class_create(actor=request.user, name=data["name"], **fields)
        obj.pk = saved.pk

    def save_related(self, request, form, formsets, change):
        """The service saved the teams."""


class VictimInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = models.PreemptionVictim
    extra = 0
    raw_id_fields = ["job"]


@admin.register(models.PreemptionPlan)
class PreemptionPlanAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
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
