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
from portal.api.pagination import JobPagination, NodePagination
from portal.api.validation import validated_body
from scheduling import selectors, services
from scheduling.models import Team


class KnownQueryParameters:
    """A query parameter the view does not know is a 400, never silently ignored (`?status=pending` on jobs)."""

    query_parameters: frozenset[str] = frozenset()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method == "GET":
            unknown = sorted(set(request.query_params) - self.query_parameters - {"format"})
            if unknown:
                known = ", ".join(sorted(self.query_parameters)) or "none"
                raise DjangoValidationError({key: [f"unknown query parameter; this list takes {known}"] for key in unknown})


class TeamsView(APIView):
    @extend_schema(responses=s.TeamOut(many=True))
    def get(self, request):
        return Response(s.TeamOut(selectors.team_list(), many=True).data)

    @extend_schema(request=s.TeamIn, responses={201: s.TeamOut})
    def post(self, request):
        def create(data: dict, validate_only: bool = False):
            return services.team_create(actor=request.user, name=data.get("name"), allotments=data.get("allotments"),
                                        validate_only=validate_only)

        team = create(validated_body(s.TeamIn, request, check=lambda fields: create(fields, validate_only=True)))
        return Response(s.TeamOut(selectors.team_get(name=team.name)).data, status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    @extend_schema(responses=s.TeamOut)
    def get(self, request, name: str):
        return Response(s.TeamOut(selectors.team_get(name=name)).data)

    @extend_schema(request=s.TeamPatchIn, responses=s.TeamOut)
    def patch(self, request, name: str):
        if not Team.objects.filter(name=name).exists():
            raise Team.DoesNotExist(name)

        def update(data: dict, validate_only: bool = False):
            return services.team_update(actor=request.user, team_name=name, allotments=data.get("allotments"),
                                        validate_only=validate_only)

        update(validated_body(s.TeamPatchIn, request, check=lambda fields: update(fields, validate_only=True)))
        return Response(s.TeamOut(selectors.team_get(name=name)).data)


class QueuesView(KnownQueryParameters, APIView):
    query_parameters = frozenset({"team"})

    @extend_schema(parameters=[s.QueueQueryIn], responses=s.QueueOut(many=True))
    def get(self, request):
        query = s.QueueQueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(s.QueueOut(selectors.queue_list(team=query.validated_data.get("team")), many=True).data)

    @extend_schema(request=s.QueueIn, responses={201: s.QueueOut})
    def post(self, request):
        def create(data: dict, validate_only: bool = False):
            return services.queue_create(
                actor=request.user,
                name=data.get("name"),
                team_name=data.get("team"),
                cohort_name=data.get("cohort") or None,
                quotas=data.get("quotas"),
                validate_only=validate_only,
                **{key: data[key] for key in ("weight", "strategy", "preemption_policy") if key in data},
            )

        queue = create(validated_body(s.QueueIn, request, check=lambda fields: create(fields, validate_only=True)))
        return Response(s.QueueOut(selectors.queue_get(name=queue.name)).data, status=status.HTTP_201_CREATED)


class QueueDetailView(APIView):
    @extend_schema(responses=s.QueueOut)
    def get(self, request, name: str):
        return Response(s.QueueOut(selectors.queue_get(name=name)).data)

    @extend_schema(request=s.QueuePatchIn, responses=s.QueueOut)
    def patch(self, request, name: str):
        selectors.queue_get(name=name)  # 404 before validating the body
        update = queue_change(services.queue_update, actor=request.user, queue_name=name)
        update(validated_body(s.QueuePatchIn, request, check=lambda fields: update(fields, validate_only=True)))
        return Response(s.QueueOut(selectors.queue_get(name=name)).data)


class JobsView(KnownQueryParameters, ListAPIView):
    """Newest first, `limit` jobs a page (default 100, at most 500), `next`/`previous` cursors; no explanations
    (`GET /api/v1/jobs/{id}/` has it)."""

    serializer_class = s.JobListOut
    filterset_class = JobFilter
    pagination_class = JobPagination
    query_parameters = frozenset({"queue", "team", "state", "owner", "cursor", "limit"})

    def get_queryset(self):
        return selectors.job_list(user=self.request.user)

    @extend_schema(request=s.JobSubmitIn, responses={201: s.JobDetailOut})
    def post(self, request):
        def submit(data: dict, validate_only: bool = False):
            topology = data.get("topology") or {}
            return services.job_submit(
                user=request.user,
                queue_name=data.get("queue"),
                flavor_name=data.get("flavor"),
                name=data.get("name"),
                pod_sets=[dict(p) for p in data.get("pod_sets", [])],
                priority_class=data.get("priority_class") or None,
                priority=data.get("priority"),
                topology_required=topology.get("required") or None,
                topology_preferred=topology.get("preferred") or None,
                runtime_limit_s=data.get("runtime_limit_s"),
                checkpoint_interval_s=data.get("checkpoint_interval_s"),
                is_preemptible=data.get("preemptible", True),
                pod_template=data.get("pod_template"),
                validate_only=validate_only,
            )

        job = submit(validated_body(s.JobSubmitIn, request, check=lambda fields: submit(fields, validate_only=True)))
        return Response(s.JobDetailOut(selectors.job_submitted(user=request.user, job=job)).data, status=status.HTTP_201_CREATED)


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


class NodesView(KnownQueryParameters, ListAPIView):
    """By name, `limit` nodes a page (default 250, at most 500), `next`/`previous` cursors."""

    serializer_class = s.NodeOut
    pagination_class = NodePagination
    query_parameters = frozenset({"cursor", "limit"})

    def get_queryset(self):
        return selectors.node_list()


class NodeCordonView(APIView):
    @extend_schema(request=s.CommentIn, responses=s.NodeOut)
    def post(self, request, name: str, is_cordoned: bool):
        """Admins: no new gangs on the node (running ones stay), or allow them again; optional `comment`."""
        node = services.node_cordon(actor=request.user, node_name=name, is_cordoned=is_cordoned, comment=_comment(request))
        return Response(s.NodeOut(selectors.node_list().get(pk=node.pk)).data)


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
                    "policy": selectors.scheduling_policy(),
                }
            ).data
        )


class UsageView(KnownQueryParameters, APIView):
    query_parameters = frozenset({"window_s"})

    @extend_schema(parameters=[s.UsageQueryIn], responses=s.UsageOut)
    def get(self, request):
        """Allocation vs use per team over the last hour (`?window_s=` to change), and the idle allocations."""
        query = s.UsageQueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        window_s = query.validated_data["window_s"]
        return Response(s.UsageOut(selectors.usage_report(user=request.user, window_s=window_s)).data)


class PreemptionsView(KnownQueryParameters, ListAPIView):
    """Newest first, `limit` plans a page (at most 500) from `offset`; `status` filters (default: all but superseded)."""

    serializer_class = s.PreemptionOut
    query_parameters = frozenset({"status", "limit", "offset"})

    @extend_schema(parameters=[s.PreemptionQueryIn])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        query = s.PreemptionQueryIn(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return selectors.preemption_list(status=query.validated_data.get("status"))


class PreemptionApproveView(APIView):
    @extend_schema(request=s.CommentIn, responses=s.PreemptionOut)
    def post(self, request, pk: int):
        plan = services.preemption_approve(actor=request.user, plan_id=pk, comment=_comment(request))
        return Response(s.PreemptionOut(selectors.preemption_list().get(pk=plan.pk)).data)


class PreemptionRejectView(APIView):
    @extend_schema(request=s.CommentIn, responses=s.PreemptionOut)
    def post(self, request, pk: int):
        plan = services.preemption_reject(actor=request.user, plan_id=pk, comment=_comment(request))
        return Response(s.PreemptionOut(selectors.preemption_list().get(pk=plan.pk)).data)


def _comment(request) -> str:
    """The decision's optional comment; an empty body is no comment."""
    return validated_body(s.CommentIn, request)["comment"] if request.data else ""


def queue_change(service, *, actor, queue_name: str):
    """`service` (queue_update, or its preview) called with a QueuePatchIn body: the fields given, `cohort` as
    `cohort_name`, and keyword arguments such as `validate_only`."""

    def call(data: dict, **options):
        fields = dict(data)
        if "cohort" in fields:
            fields["cohort_name"] = fields.pop("cohort") or None
        return service(actor=actor, queue_name=queue_name, **fields, **options)

    return call


class PriorityClassesView(APIView):
    @extend_schema(responses=s.PriorityClassOut(many=True))
    def get(self, request):
        return Response(s.PriorityClassOut(selectors.priority_class_list(), many=True).data)

    @extend_schema(request=s.PriorityClassIn, responses={201: s.PriorityClassOut})
    def post(self, request):
        def create(data: dict, validate_only: bool = False):
            return services.priority_class_create(actor=request.user, **{"name": None, "value": None, **data},
                                                  validate_only=validate_only)

        pc = create(validated_body(s.PriorityClassIn, request, check=lambda fields: create(fields, validate_only=True)))
        return Response(s.PriorityClassOut(selectors.priority_class_get(name=pc.name)).data, status=status.HTTP_201_CREATED)


class PriorityClassDetailView(APIView):
    @extend_schema(responses=s.PriorityClassOut)
    def get(self, request, name: str):
        return Response(s.PriorityClassOut(selectors.priority_class_get(name=name)).data)

    @extend_schema(request=s.PriorityClassPatchIn, responses=s.PriorityClassOut)
    def patch(self, request, name: str):
        selectors.priority_class_get(name=name)  # 404 before validating the body

        def update(data: dict, validate_only: bool = False):
            return services.priority_class_update(actor=request.user, name=name, **data, validate_only=validate_only)

        update(validated_body(s.PriorityClassPatchIn, request, check=lambda fields: update(fields, validate_only=True)))
        return Response(s.PriorityClassOut(selectors.priority_class_get(name=name)).data)


class AuditView(APIView):
    @extend_schema(
        parameters=[s.AuditQueryIn],
        responses=s.AuditPageOut,
    )
    def get(self, request):
        """The audit log, newest first (admins: all; team leads: their teams'); `before` pages back by id."""
        query = s.AuditQueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = selectors.audit_page(user=request.user, **{k: v for k, v in query.validated_data.items() if v not in (None, "")})
        return Response(s.AuditPageOut({"results": page.records, "next_before": page.next_before}).data)
