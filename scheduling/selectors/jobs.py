"""Job reads: the list with filters and the detail with placement, events and explanation."""

from __future__ import annotations

import copy

from django.contrib.auth import get_user_model
from django.db.models import CharField, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from scheduling.models import Explanation, Job, JobEvent, Placement, Queue
from scheduling.permissions import restrict_event_actors, restrict_jobs

PAGE_SIZE = 50
"""Rows of a page of the web job list."""


def _why():
    """A pending job's reason in one line, read from its stored explanation without loading the rest of it."""
    line = Coalesce(KeyTextTransform("headline", "data"), KeyTextTransform("summary", "data"), output_field=CharField())
    return Subquery(Explanation.objects.filter(key=OuterRef("explanation_key")).values(line=line)[:1], output_field=CharField())


def job_list(*, user, queue: str | None = None, team: str | None = None, state: str | None = None, owner: str | None = None) -> QuerySet:
    """Jobs `user` may see, newest first (the job_list_order indexes), annotated with `why`, without the
    explanation; `owner` matches only jobs whose owner `user` may see."""
    jobs = (
        restrict_jobs(user, Job.objects.all())
        .select_related("queue__team", "flavor", "owner", "priority_class").prefetch_related("pod_sets")
        .defer("pod_template").annotate(why=_why())
    )
    return jobs_filter(jobs, queue=queue, team=team, state=state, owner=owner).order_by("-submitted_at", "-id")


def jobs_filter(jobs: QuerySet, *, queue: str | None = None, team: str | None = None, state: str | None = None,
                owner: str | None = None) -> QuerySet:
    """The job list's filters, for the web list and the API's query parameters alike; an empty value filters nothing.
    `owner` matches only jobs whose owner the reader may see (`jobs` come from restrict_jobs)."""
    if queue:
        jobs = jobs.filter(queue_id__in=queue_ids(name=queue))
    if team:
        jobs = jobs.filter(queue_id__in=queue_ids(team=team))
    if state:
        jobs = jobs.filter(state=state)
    if owner:
        jobs = jobs.filter(owner_id__in=owner_ids(username=owner), is_visible_in_full=True)
    return jobs


def queue_ids(*, name: str | None = None, team: str | None = None) -> list[int]:
    """Resolved first, so the job list filters on queue_id and its index serves both filter and order."""
    queues = Queue.objects.filter(name=name) if name is not None else Queue.objects.filter(team__name=team)
    return list(queues.values_list("id", flat=True))


def owner_ids(*, username: str) -> list[int]:
    """Resolved first, as queue_ids: the job_list_owner index then serves both filter and order."""
    return list(get_user_model().objects.filter(username=username).values_list("pk", flat=True))


def job_page(jobs: QuerySet, *, older_than: int | None = None, newer_than: int | None = None, size: int = PAGE_SIZE) -> dict:
    """One keyset page of `jobs` (ordered newest first) next to the job `older_than` or `newer_than` (ids):
    `jobs` for the rows and the ids that continue the list either way (None at its ends). No count."""
    anchor_id = older_than if older_than is not None else newer_than
    anchor = Job.objects.filter(pk=anchor_id).values_list("submitted_at", flat=True).first() if anchor_id else None
    if anchor is None:
        rows, has_newer = list(jobs[: size + 1]), False
        has_older = len(rows) > size
        rows = rows[:size]
    # (submitted_at, id) before the anchor, written as a range on submitted_at the list's index walks from the
    # anchor on, less the anchor's own second's later ids (an OR of the two would scan the index from its start).
    elif older_than is not None:
        rows = list(jobs.filter(submitted_at__lte=anchor).exclude(submitted_at=anchor, id__gte=anchor_id)[: size + 1])
        has_older, has_newer = len(rows) > size, True
        rows = rows[:size]
    else:
        rows = list(jobs.filter(submitted_at__gte=anchor).exclude(submitted_at=anchor, id__lte=anchor_id)
                    .order_by("submitted_at", "id")[: size + 1])
        has_newer, has_older = len(rows) > size, True
        rows = rows[:size][::-1]
    return {
        "jobs": rows,
        "older_than": rows[-1].pk if rows and has_older else None,
        "newer_than": rows[0].pk if rows and has_newer else None,
    }


def job_submitted(*, user, job: Job) -> Job:
    """`job` as job_get would read it, right after `user` submitted it, for the answer to the submission only: a copy
    whose pod sets, placements (none yet) and events are the rows job_submit wrote (`job.written`), as a prefetch
    would have set them, so the job job_submit returned keeps no prefetch of its own. Its submitter sees it in full
    (they are of its team, or an admin), and nothing has explained it yet. No second read."""
    pod_sets, event = job.written
    shown = copy.copy(job)
    shown._prefetched_objects_cache = {"pod_sets": list(pod_sets), "placements": [], "events": [event]}
    shown.is_visible_in_full = True
    shown.why = None
    restrict_event_actors(user, shown)
    return shown


def job_get(*, user, job_id: int) -> Job:
    """One visible job with pod sets, placement (node names) and events (actors hidden on other teams' jobs);
    raises Job.DoesNotExist."""
    job = (
        restrict_jobs(user, Job.objects.all())
        .annotate(why=_why())
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

