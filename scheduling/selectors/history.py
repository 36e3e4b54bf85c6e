"""History from job events: per queue and day, the waits (p50/p95 from submission to admission), admissions and
preemptions, over the last days.

A day that has ended does not change (events are written as they happen), so its rows are computed once and stored
(HistoryDay), for every web worker; a page view reads only today's events. On a busy fleet a week is a hundred
thousand events, read once."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import asdict, dataclass

from django.db import connection
from django.db.models import DurationField, ExpressionWrapper, F
from django.db.models.functions import TruncDate

from scheduling import clock
from scheduling.models import HistoryDay, Job, JobEvent, Queue


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


SETTLED_AFTER_S = 600
"""An ended day is stored once it ended this long ago: a pass that began before midnight may still be writing its
events (a pass holds its lock for seconds)."""


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
    """Rows by day, then queue: the stored ended days (one query; those missing computed in one and stored), then the
    days since from their events. On PostgreSQL the database groups and takes the percentiles; elsewhere Python does."""
    now = (now or clock.now_datetime()).astimezone(dt.timezone.utc)
    today = now.date()
    settled = [today - dt.timedelta(days=back) for back in range(days - 1, 0, -1)
               if now - _day_start(today - dt.timedelta(days=back - 1)) >= dt.timedelta(seconds=SETTLED_AFTER_S)]
    stored = dict(HistoryDay.objects.filter(day__in=settled).values_list("day", "rows"))
    names = dict(Queue.objects.values_list("pk", "name"))
    group = _grouped_in_database if connection.vendor == "postgresql" else _grouped_in_python
    missing = [day for day in settled if day not in stored]
    if missing:
        computed = group(missing[0], settled[-1] + dt.timedelta(days=1), names)
        fresh = {day: [_stored(row) for row in computed if row.day == day] for day in missing}
        HistoryDay.objects.bulk_create([HistoryDay(day=day, rows=rows) for day, rows in fresh.items()], ignore_conflicts=True)
        stored.update(fresh)
    rows = [DayOfQueue(day=day, **row) for day in settled for row in stored[day]]
    since = settled[-1] + dt.timedelta(days=1) if settled else today - dt.timedelta(days=days - 1)
    return rows + group(since, today + dt.timedelta(days=1), names)


def _stored(row: DayOfQueue) -> dict:
    return {key: value for key, value in asdict(row).items() if key != "day"}


def _grouped_in_python(first_day: dt.date, end_day: dt.date, names: dict[int, str]) -> list[DayOfQueue]:
    events = _events_between(first_day, end_day).values_list("day", "to_state", "job__queue_id", "wait")
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


def _grouped_in_database(first_day: dt.date, end_day: dt.date, names: dict[int, str]) -> list[DayOfQueue]:
    # Each event finds its job through the primary key (LATERAL … LIMIT 1 keeps it so). Left to choose, the planner
    # joins a day's few thousand events by hashing the whole job table (600,000 rows: 120 ms instead of 20) as soon
    # as it overestimates the events, which it does for today's, mixed with today's submissions.
    event, job = JobEvent._meta.db_table, Job._meta.db_table
    sql = f"""
        SELECT (e.created_at AT TIME ZONE 'UTC')::date, j.queue_id,
               COUNT(*) FILTER (WHERE e.to_state = 'admitted'), COUNT(*) FILTER (WHERE e.to_state = 'preempted'),
               PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY e.created_at - j.submitted_at) FILTER (WHERE e.to_state = 'admitted'),
               PERCENTILE_DISC(0.95) WITHIN GROUP (ORDER BY e.created_at - j.submitted_at) FILTER (WHERE e.to_state = 'admitted')
        FROM {event} e CROSS JOIN LATERAL (SELECT queue_id, submitted_at FROM {job} WHERE id = e.job_id LIMIT 1) j
        WHERE e.to_state IN ('admitted', 'preempted') AND e.created_at >= %s AND e.created_at < %s
        GROUP BY 1, 2"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [_day_start(first_day), _day_start(end_day)])
        grouped = cursor.fetchall()
    rows = [
        DayOfQueue(day=day, queue=names.get(queue_id, ""), admissions=admissions, preemptions=preemptions,
                   p50_wait_s=None if p50 is None else max(0.0, p50.total_seconds()),
                   p95_wait_s=None if p95 is None else max(0.0, p95.total_seconds()))
        for day, queue_id, admissions, preemptions, p50, p95 in grouped
    ]
    return sorted(rows, key=lambda row: (row.day, row.queue))
