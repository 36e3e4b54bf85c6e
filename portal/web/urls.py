"""URLs of the server-rendered pages."""

from django.urls import path

from portal.web import queues, views

app_name = "web"

urlpatterns = [
    path("", views.job_list, name="job-list"),
    path("jobs/new/", views.job_submit, name="job-submit"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/usage/", views.job_usage, name="job-usage"),
    path("fleet/", views.fleet, name="fleet"),
    path("fleet/usage/", views.fleet_usage, name="fleet-usage"),
    path("queues/", queues.queue_list, name="queue-list"),
    path("queues/<slug:name>/quotas/<str:flavor>/", queues.queue_quota_edit, name="queue-quota-edit"),
    path("queues/<slug:name>/quotas/<str:flavor>/preview/", queues.queue_quota_preview, name="queue-quota-preview"),
    path("teams/", views.team_list, name="team-list"),
    path("teams/<slug:name>/", views.team_detail, name="team-detail"),
    path("teams/<slug:name>/usage/", views.team_usage, name="team-usage"),
    path("teams/<slug:name>/allotments/<str:flavor>/", queues.team_allotment_edit, name="team-allotment-edit"),
    path("teams/<slug:name>/allotments/<str:flavor>/preview/", queues.team_allotment_preview, name="team-allotment-preview"),
    path("preemptions/", views.preemption_list, name="preemption-list"),
    path("history/", views.history, name="history"),
    path("borrowing/", views.borrowing, name="borrowing"),
    path("gaming/", views.gaming_signals, name="gaming-signals"),
    path("preemptions/<int:pk>/<str:decision>/", views.preemption_decide, name="preemption-decide"),
    path("audit/", views.audit_list, name="audit-list"),
]
