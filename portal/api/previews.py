"""What-if previews: a proposed queue or allotment change, evaluated by running the core forward; nothing is saved."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import serializers as s
from portal.api.validation import validated_body
from portal.api.views import queue_change
from scheduling import selectors, services
from scheduling.models import Team
from scheduling.services.explanations import queue_quota_preview, team_allotment_preview


class TeamWaitOut(serializers.Serializer):
    pending_jobs = serializers.IntegerField()
    mean_wait_s = serializers.FloatField(allow_null=True)
    beyond_horizon = serializers.IntegerField()


class TeamRowOut(serializers.Serializer):
    team = serializers.CharField()
    before = TeamWaitOut(allow_null=True)
    after = TeamWaitOut(allow_null=True)


class JobEstimateOut(serializers.Serializer):
    id = serializers.IntegerField()
    estimated_start_before = serializers.CharField(allow_null=True)
    estimated_start_after = serializers.CharField(allow_null=True)
    wait_before_s = serializers.FloatField(allow_null=True)
    wait_after_s = serializers.FloatField(allow_null=True)


class ReclaimableOut(serializers.Serializer):
    job = serializers.IntegerField()
    queue = serializers.CharField()
    team = serializers.CharField()
    gpus = serializers.IntegerField()
    flavor = serializers.CharField()


class PreviewOut(serializers.Serializer):
    now = serializers.CharField()
    horizon_s = serializers.FloatField()
    teams = TeamRowOut(many=True)
    jobs = JobEstimateOut(many=True, help_text="The changed queues' pending jobs: estimated start before vs after.")
    reclaimable = ReclaimableOut(many=True, help_text="Running jobs of other teams the change makes reclaimable.")
    proposed = serializers.DictField()
    saved = serializers.BooleanField()


class QueuePreviewView(APIView):
    @extend_schema(request=s.QueuePatchIn, responses=PreviewOut)
    def post(self, request, name: str):
        """The same body as PATCH /queues/{name}/, the same permissions; returns waits before vs after, saves nothing."""
        selectors.queue_get(name=name)  # 404 before validating the body
        check = queue_change(services.queue_update, actor=request.user, queue_name=name)
        data = validated_body(s.QueuePatchIn, request, check=lambda fields: check(fields, validate_only=True))
        return Response(queue_change(queue_quota_preview, actor=request.user, queue_name=name)(data))


class TeamPreviewView(APIView):
    @extend_schema(request=s.TeamPatchIn, responses=PreviewOut)
    def post(self, request, name: str):
        """Admins: the same body as PATCH /teams/{name}/; returns waits before vs after, saves nothing."""
        if not Team.objects.filter(name=name).exists():
            raise Team.DoesNotExist(name)
        data = validated_body(s.TeamPatchIn, request, check=lambda fields: services.team_update(
            actor=request.user, team_name=name, allotments=fields.get("allotments"), validate_only=True))
        return Response(team_allotment_preview(actor=request.user, team_name=name, allotments=data["allotments"]))
