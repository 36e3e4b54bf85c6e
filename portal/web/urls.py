"""URLs of the server-rendered pages."""

from django.urls import path

from portal.web.views import fleet, jobs, queues, teams

app_name = "web"

urlpatterns = [
    path("", jobs.job_list, name="job-list"),
    path("jobs/new/", jobs.job_submit, name="job-submit"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/usage/", jobs.job_usage, name="job-usage"),
    path("fleet/", fleet.fleet, name="fleet"),
    path("fleet/usage/", fleet.fleet_usage, name="fleet-usage"),
    path("queues/", queues.queue_list, name="queue-list"),
    path("queues/<slug:name>/quotas/<str:flavor>/", queues.queue_quota_edit, name="queue-quota-edit"),
    path("queues/<slug:name>/quotas/<str:flavor>/preview/", queues.queue_quota_preview, name="queue-quota-preview"),
    path("teams/", teams.team_list, name="team-list"),
    path("teams/<slug:name>/", teams.team_detail, name="team-detail"),
    path("teams/<slug:name>/usage/", teams.team_usage, name="team-usage"),
    path("teams/<slug:name>/allotments/<str:flavor>/", queues.team_allotment_edit, name="team-allotment-edit"),
    path("teams/<slug:name>/allotments/<str:flavor>/preview/", queues.team_allotment_preview, name="team-allotment-preview"),
    path("preemptions/", fleet.preemption_list, name="preemption-list"),
    path("history/", fleet.history, name="history"),
    path("borrowing/", fleet.borrowing, name="borrowing"),
    path("gaming/", teams.gaming_signals, name="gaming-signals"),
    path("preemptions/<int:pk>/<str:decision>/", fleet.preemption_decide, name="preemption-decide"),
    path("audit/", fleet.audit_list, name="audit-list"),
]
