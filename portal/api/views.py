"""REST API views: one per operation; each validates input, calls one service or selector, shapes output."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import serializers as s
from portal.api.filters import JobFilter
from scheduling import selectors, services
from scheduling.core.policy import policy_in_force
from scheduling.models import Team
from scheduling.snapshots import scheduler_config


class TeamsView(APIView):
    @extend_schema(responses=s.TeamOut(many=True))
    def get(self, request):
        return Response(s.TeamOut(selectors.team_list(), many=True).data)

    @extend_schema(request=s.TeamIn, responses={201: s.TeamOut})
    def post(self, request):
        data = _valid(s.TeamIn, request)
        team = services.team_create(actor=request.user, name=data["name"], allotments=data["allotments"])
        return Response(s.TeamOut(selectors.team_get(name=team.name)).data, status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    @extend_schema(responses=s.TeamOut)
    def get(self, request, name: str):
        return Response(s.TeamOut(selectors.team_get(name=name)).data)

    @extend_schema(request=s.TeamPatchIn, responses=s.TeamOut)
    def patch(self, request, name: str):
        if not Team.objects.filter(name=name).exists():
            raise Team.DoesNotExist(name)
        data = _valid(s.TeamPatchIn, request)
        services.team_update(actor=request.user, team_name=name, allotments=data["allotments"])
        return Response(s.TeamOut(selectors.team_get(name=name)).data)


class QueuesView(APIView):
    @extend_schema(responses=s.QueueOut(many=True))
    def get(self, request):
        return Response(s.QueueOut(selectors.queue_list(team=request.query_params.get("team")), many=True).data)

    @extend_schema(request=s.QueueIn, responses={201: s.QueueOut})
    def post(self, request):
        data = _valid(s.QueueIn, request)
        queue = services.queue_create(
            actor=request.user,
            name=data["name"],
            team_name=data["team"],
            cohort_name=data["cohort"] or None,
            weight=data["weight"],
            strategy=data["strategy"],
            preemption_policy=data["preemption_policy"],
            quotas=data["quotas"],
        )
        return Response(s.QueueOut(selectors.queue_get(name=queue.name)).data, status=status.HTTP_201_CREATED)


class QueueDetailView(APIView):
    @extend_schema(responses=s.QueueOut)
    def get(self, request, name: str):
        return Response(s.QueueOut(selectors.queue_get(name=name)).data)

    @extend_schema(request=s.QueuePatchIn, responses=s.QueueOut)
    def patch(self, request, name: str):
        selectors.queue_get(name=name)  # 404 before validating the body
        data = _valid(s.QueuePatchIn, request)
        if "cohort" in data:
            data["cohort_name"] = data.pop("cohort") or None
        services.queue_update(actor=request.user, queue_name=name, **data)
        return Response(s.QueueOut(selectors.queue_get(name=name)).data)


class JobsView(ListAPIView):
    serializer_class = s.JobOut
    filterset_class = JobFilter

    def get_queryset(self):
        return selectors.job_list(user=self.request.user)

    @extend_schema(request=s.JobSubmitIn, responses={201: s.JobDetailOut})
    def post(self, request):
        data = _valid(s.JobSubmitIn, request)
        topology = data["topology"] or {}
        job = services.job_submit(
            user=request.user,
            queue_name=data["queue"],
            flavor_name=data["flavor"],
            name=data["name"],
            pod_sets=[dict(p) for p in data["pod_sets"]],
            priority=data["priority"],
            topology_required=topology.get("required") or None,
            topology_preferred=topology.get("preferred") or None,
            runtime_limit_s=data["runtime_limit_s"],
            checkpoint_interval_s=data["checkpoint_interval_s"],
            is_preemptible=data["preemptible"],
            pod_template=data["pod_template"],
        )
        return Response(s.JobDetailOut(selectors.job_get(user=request.user, job_id=job.pk)).data, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(responses=s.JobDetailOut)
    def get(self, request, pk: int):
        return Response(s.JobDetailOut(selectors.job_get(user=request.user, job_id=pk)).data)


class JobCancelView(APIView):
    @extend_schema(request=None, responses=s.JobDetailOut)
    def post(self, request, pk: int):
        selectors.job_get(user=request.user, job_id=pk)
        services.job_cancel(user=request.user, job_id=pk)
        return Response(s.JobDetailOut(selectors.job_get(user=request.user, job_id=pk)).data)


class NodesView(ListAPIView):
    serializer_class = s.NodeOut
    pagination_class = None

    def get_queryset(self):
        return selectors.node_list()


class FleetView(APIView):
    @extend_schema(responses=s.FleetOut)
    def get(self, request):
        summary = selectors.fleet_summary()
        return Response(
            s.FleetOut(
                {
                    "topology": summary.topology,
                    "totals": summary.totals.as_dict(),
                    "by_flavor": {k: v.as_dict() for k, v in summary.by_flavor.items()},
                    "racks": [r.__dict__ for r in summary.racks],
                    "policy": policy_in_force(scheduler_config()),
                }
            ).data
        )


class UsageView(APIView):
    @extend_schema(responses=s.UsageOut)
    def get(self, request):
        """Allocation vs use per team over the last hour (`?window_s=` to change), and the idle allocations."""
        try:
            window_s = float(request.query_params.get("window_s", 3600))
        except ValueError:
            raise DjangoValidationError({"window_s": ["must be a number of seconds"]}) from None
        if not 60 <= window_s <= 7 * 24 * 3600:
            raise DjangoValidationError({"window_s": ["must be between 60 and 604800 seconds"]})
        return Response(s.UsageOut(selectors.usage_report(user=request.user, window_s=window_s)).data)


class PreemptionsView(ListAPIView):
    serializer_class = s.PreemptionOut

    def get_queryset(self):
        return selectors.preemption_list(status=self.request.query_params.get("status"))


class PreemptionApproveView(APIView):
    @extend_schema(request=None, responses=s.PreemptionOut)
    def post(self, request, pk: int):
        plan = services.preemption_approve(actor=request.user, plan_id=pk)
        return Response(s.PreemptionOut(selectors.preemption_list().get(pk=plan.pk)).data)


class PreemptionRejectView(APIView):
    @extend_schema(request=None, responses=s.PreemptionOut)
    def post(self, request, pk: int):
        plan = services.preemption_reject(actor=request.user, plan_id=pk)
        return Response(s.PreemptionOut(selectors.preemption_list().get(pk=plan.pk)).data)


def _valid(serializer_class, request) -> dict:
    """The validated body, or a 400 {field: [reason]}; a body that is not a JSON object is rejected too."""
    if not isinstance(request.data, dict):
        raise DjangoValidationError({"body": ["must be a JSON object"]})
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
