"""Reads of a pending job's explanation, with its live place in the queue."""

from __future__ import annotations

from django.db.models import Count, Q, Sum

from scheduling.core.explain import iso
from scheduling.core.model import JobState
from scheduling.models import Explanation, Job
from scheduling.models.jobs import JOB_QUEUE_ORDER
from scheduling.services.common import to_epoch

AHEAD_SHOWN = 5


def job_explanation_get(*, job: Job) -> dict | None:
    """The stored explanation of a pending job (None otherwise) with its start estimate, and its `position` read now
    from the queue's order (priority, then submit time, then id — the job_pending_order index): how many wait ahead,
    with how many GPUs, and the first few of them."""
    if job.state != JobState.PENDING.value or not job.explanation_key:
        return None
    stored = Explanation.objects.filter(key=job.explanation_key).values_list("data", "checked_at").first()
    if stored is None:
        return None
    explanation = {**stored[0], "checked_at": stored[1].timestamp(), "estimated_start": iso(to_epoch(job.estimated_start)),
                   "estimated_at": iso(to_epoch(job.estimated_at))}
    ahead = Job.objects.filter(queue_id=job.queue_id, state=JobState.PENDING.value).filter(
        Q(priority__gt=job.priority)
        | Q(priority=job.priority, submitted_at__lt=job.submitted_at)
        | Q(priority=job.priority, submitted_at=job.submitted_at, id__lt=job.id)
    )
    totals = ahead.aggregate(jobs=Count("id"), gpus=Sum("gpus"))  # one range of the job_pending_order index
    first = list(ahead.order_by(*JOB_QUEUE_ORDER).values("id", "gpus", "priority")[:AHEAD_SHOWN])
    explanation["position"] = {"in_queue": totals["jobs"] + 1, "ahead": first, "gpus_ahead": totals["gpus"] or 0}
    return explanation
