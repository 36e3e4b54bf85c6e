"""Job reads: the list with filters and the detail with placement, events and explanation."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from scheduling.models import Job, JobEvent, Placement
from scheduling.permissions import restrict_event_actors, restrict_jobs


def job_list(*, user, queue: str | None = None, team: str | None = None, state: str | None = None, owner: str | None = None) -> QuerySet:
    """Jobs `user` may see, newest first; `owner` matches only jobs whose owner `user` may see."""
    jobs = restrict_jobs(user, Job.objects.all()).select_related("queue__team", "flavor", "owner", "priority_class").prefetch_related("pod_sets")
    if queue:
        jobs = jobs.filter(queue__name=queue)
    if team:
        jobs = jobs.filter(queue__team__name=team)
    if state:
        jobs = jobs.filter(state=state)
    if owner:
        jobs = jobs.filter(owner__username=owner, is_visible_in_full=True)
    return jobs.order_by("-submitted_at", "-id")


def job_get(*, user, job_id: int) -> Job:
    """One visible job with pod sets, placement (node names) and events (actors hidden on other teams' jobs);
    raises Job.DoesNotExist."""
    job = (
        restrict_jobs(user, Job.objects.all())
        .select_related("queue__team", "flavor", "owner", "preempted_by", "priority_class")
        .prefetch_related(
            "pod_sets",
            Prefetch("placements", queryset=Placement.objects.select_related("node", "pod_set").order_by("pod_set_id", "pod_index")),
            Prefetch("events", queryset=JobEvent.objects.select_related("actor").order_by("created_at", "id")),
        )
        .get(pk=job_id)
    )
    restrict_event_actors(user, job)
    return job
