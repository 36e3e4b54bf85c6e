"""History from job events: per queue and day, the waits (p50/p95 from submission to admission), admissions and
preemptions, over the last days.

A day that has ended does not change (events are written as they happen), so its rows are computed once and kept
in the cache; a page view reads only today's events. On a busy fleet a week is a hundred thousand events."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import Aggregate, Count, DurationField, ExpressionWrapper, F, Q
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


class _PercentileDisc(Aggregate):
    """PostgreSQL's nearest-rank percentile, an ordered-set aggregate (`_percentile` in SQL)."""

    function = "percentile_disc"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = DurationField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


ENDED_DAY_CACHE_S = 8 * 24 * 3600
"""An ended day's rows stay cached past the longest window shown (7 days)."""


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)


def _events_between(first_day: dt.date, end_day: dt.date):
    """Admitted and preempted events from the start of `first_day` to the start of `end_day` (UTC days)."""
    # The day and the wait computed by the database: one date and one interval a row, not two zoned timestamps.
    return JobEvent.objects.filter(
        created_at__gte=_day_start(first_day), created_at__lt=_day_start(end_day), to_state__in=["admitted", "preempted"]
    ).annotate(
        day=TruncDate("created_at", tzinfo=dt.timezone.utc),
        wait=ExpressionWrapper(F("created_at") - F("job__submitted_at"), output_field=DurationField()),
    )


def queue_history(*, days: int = 7, now: dt.datetime | None = None) -> list[DayOfQueue]:
    """Rows by day, then queue: ended days from the cache (one query for those missing), today from its events.
    On PostgreSQL the database groups and takes the percentiles; elsewhere Python does."""
    today = (now or clock.now_datetime()).astimezone(dt.timezone.utc).date()
    ended = [today - dt.timedelta(days=back) for back in range(days - 1, 0, -1)]
    keys = {day: f"gangway:history:{day.isoformat()}" for day in ended}
    cached = cache.get_many(keys.values())
    names = dict(Queue.objects.values_list("pk", "name"))
    group = _grouped_in_database if connection.vendor == "postgresql" else _grouped_in_python
    missing = [day for day in ended if keys[day] not in cached]
    if missing:
        computed = group(_events_between(missing[0], today), names)
        fresh = {keys[day]: [row for row in computed if row.day == day] for day in missing}
        cache.set_many(fresh, ENDED_DAY_CACHE_S)
        cached.update(fresh)
    rows = [row for day in ended for row in cached[keys[day]]]
    return rows + group(_events_between(today, today + dt.timedelta(days=1)), names)


def _grouped_in_python(events, names: dict[int, str]) -> list[DayOfQueue]:
    events = events.values_list("day", "to_state", "job__queue_id", "wait")
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


def _grouped_in_database(events, names: dict[int, str]) -> list[DayOfQueue]:
    admitted = Q(to_state="admitted")
    grouped = events.values("day", "job__queue_id").annotate(
        admissions=Count("id", filter=admitted),
        preemptions=Count("id", filter=Q(to_state="preempted")),
        p50=_PercentileDisc("wait", 0.5, filter=admitted),
        p95=_PercentileDisc("wait", 0.95, filter=admitted),
    ).order_by()
    rows = [
        DayOfQueue(
            day=group["day"], queue=names.get(group["job__queue_id"], ""), admissions=group["admissions"],
            preemptions=group["preemptions"],
            p50_wait_s=None if group["p50"] is None else max(0.0, group["p50"].total_seconds()),
            p95_wait_s=None if group["p95"] is None else max(0.0, group["p95"].total_seconds()),
        )
        for group in grouped
    ]
    return sorted(rows, key=lambda row: (row.day, row.queue))
