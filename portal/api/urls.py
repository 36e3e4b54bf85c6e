"""URLs of the REST API, version 1."""

from django.urls import path, re_path

from portal.api import previews, views

app_name = "api"

urlpatterns = [
    path("teams/", views.TeamsView.as_view(), name="teams"),
    path("teams/<slug:name>/", views.TeamDetailView.as_view(), name="team-detail"),
    path("queues/", views.QueuesView.as_view(), name="queues"),
    path("queues/<slug:name>/", views.QueueDetailView.as_view(), name="queue-detail"),
    re_path(r"^queues/(?P<name>[-a-zA-Z0-9_]+)/preview/?$", previews.QueuePreviewView.as_view(), name="queue-preview"),
    re_path(r"^teams/(?P<name>[-a-zA-Z0-9_]+)/preview/?$", previews.TeamPreviewView.as_view(), name="team-preview"),
    path("jobs/", views.JobsView.as_view(), name="jobs"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.JobCancelView.as_view(), name="job-cancel"),
    path("nodes/", views.NodesView.as_view(), name="nodes"),
    path("nodes/<str:name>/cordon/", views.NodeCordonView.as_view(), {"is_cordoned": True}, name="node-cordon"),
    path("nodes/<str:name>/uncordon/", views.NodeCordonView.as_view(), {"is_cordoned": False}, name="node-uncordon"),
    path("fleet/", views.FleetView.as_view(), name="fleet"),
    path("usage/", views.UsageView.as_view(), name="usage"),
    path("preemptions/", views.PreemptionsView.as_view(), name="preemptions"),
    path("preemptions/<int:pk>/approve/", views.PreemptionApproveView.as_view(), name="preemption-approve"),
    path("preemptions/<int:pk>/reject/", views.PreemptionRejectView.as_view(), name="preemption-reject"),
    path("priority-classes/", views.PriorityClassesView.as_view(), name="priority-classes"),
    path("priority-classes/<slug:name>/", views.PriorityClassDetailView.as_view(), name="priority-class-detail"),
    path("audit/", views.AuditView.as_view(), name="audit"),
]
