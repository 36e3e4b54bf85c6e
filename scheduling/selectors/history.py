"""History from job events: per queue and day, the waits (p50/p95 from submission to admission), admissions and
preemptions, over the last days."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import DurationField, ExpressionWrapper, F
from django.db.models.functions import TruncDate

from scheduling import clock
from scheduling.models import JobEvent, Queue


@dataclass
class DayOfQueue:
    day: dt.date
    queue: str
    admissions: int = 0
    preemptions: int = 0
    p50_wait_s: float | None = None
    p95_wait_s: float | None = None


def _percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, -(-int(fraction * 100) * len(sorted_values) // 100))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def queue_history(*, days: int = 7, now: dt.datetime | None = None) -> list[DayOfQueue]:
    """One query over the window's admitted and preempted events (and one for the queues' names); rows by day, then queue."""
    now = now or clock.now_datetime()
    since = (now - dt.timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    # The day and the wait computed by the database: one date and one interval a row, not two zoned timestamps.
    events = JobEvent.objects.filter(created_at__gte=since, to_state__in=["admitted", "preempted"]).annotate(
        day=TruncDate("created_at", tzinfo=dt.timezone.utc),
        wait=ExpressionWrapper(F("created_at") - F("job__submitted_at"), output_field=DurationField()),
    ).values_list("day", "to_state", "job__queue_id", "wait")
    names = dict(Queue.objects.values_list("pk", "name"))
    waits: dict[tuple, list[float]] = defaultdict(list)
    rows: dict[tuple, DayOfQueue] = {}
    for day, state, queue_id, wait in events:
        key = (day, names.get(queue_id, ""))
        row = rows.get(key)
        if row is None:
            row = rows[key] = DayOfQueue(day=day, queue=key[1])
        if state == "admitted":
            row.admissions += 1
            waits[key].append(max(0.0, wait.total_seconds()))
        else:
            row.preemptions += 1
    for key, values in waits.items():
        values.sort()
        rows[key].p50_wait_s, rows[key].p95_wait_s = _percentile(values, 0.5), _percentile(values, 0.95)
    return [rows[key] for key in sorted(rows)]
