"""History from job events: per queue and day, the waits (p50/p95 from submission to admission), admissions and
preemptions, over the last days.

Events are written as they happen, so what was written more than SETTLED_AFTER_S ago does not change: an ended day
is computed once and stored (HistoryDay, for every web worker); today's settled events are read once and kept in the
cache with their waits; a page view reads only the events of the last minutes. On a busy fleet a week is a hundred
thousand events, and a day's admissions thousands."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field

from django.core.cache import cache
from django.db import connection
from django.db.models import DurationField, ExpressionWrapper, F

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
"""Events older than this are all written: a pass that began earlier (it holds its lock for seconds) has committed."""
TODAY_KEY = "gangway:history:today"

Event = tuple[float, int, str, float]
"""(when, queue id, "admitted" or "preempted", wait from submission), seconds."""


@dataclass
class Tally:
    """One day's admissions (their waits) and preemptions, per queue id."""

    waits: dict[int, list[float]] = field(default_factory=dict)
    preemptions: dict[int, int] = field(default_factory=dict)

    def plus(self, events: list[Event]) -> Tally:
        tally = Tally({queue: list(waits) for queue, waits in self.waits.items()}, dict(self.preemptions))
        for _, queue_id, state, wait_s in events:
            if state == "admitted":
                tally.waits.setdefault(queue_id, []).append(max(0.0, wait_s))
            else:
                tally.preemptions[queue_id] = tally.preemptions.get(queue_id, 0) + 1
        return tally

    def rows(self, day: dt.date, names: dict[int, str]) -> list[DayOfQueue]:
        rows = []
        for queue_id in self.waits.keys() | self.preemptions.keys():
            waits = sorted(self.waits.get(queue_id, []))
            rows.append(DayOfQueue(
                day=day, queue=names.get(queue_id, ""), admissions=len(waits), preemptions=self.preemptions.get(queue_id, 0),
                p50_wait_s=_percentile(waits, 0.5) if waits else None, p95_wait_s=_percentile(waits, 0.95) if waits else None,
            ))
        return sorted(rows, key=lambda row: row.queue)


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)


def _events(since: dt.datetime, until: dt.datetime) -> list[Event]:
    """The admissions and preemptions written in [since, until)."""
    return _events_by_primary_key(since, until) if connection.vendor == "postgresql" else _events_joined(since, until)


def _events_by_primary_key(since: dt.datetime, until: dt.datetime) -> list[Event]:
    # Each event finds its job by primary key (LATERAL … LIMIT 1 keeps it so). Left to choose, PostgreSQL joins a day's
    # few thousand events by hashing the whole job table (600,000 rows: 120 ms, not 20) as soon as it overestimates
    # the events, which it does for today's, mixed with today's submissions.
    event, job = JobEvent._meta.db_table, Job._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"""
            SELECT EXTRACT(EPOCH FROM e.created_at)::float, j.queue_id, e.to_state,
                   EXTRACT(EPOCH FROM e.created_at - j.submitted_at)::float
            FROM {event} e CROSS JOIN LATERAL (SELECT queue_id, submitted_at FROM {job} WHERE id = e.job_id LIMIT 1) j
            WHERE e.to_state IN ('admitted', 'preempted') AND e.created_at >= %s AND e.created_at < %s""", [since, until])
        return cursor.fetchall()


def _events_joined(since: dt.datetime, until: dt.datetime) -> list[Event]:
    events = JobEvent.objects.filter(created_at__gte=since, created_at__lt=until, to_state__in=["admitted", "preempted"]).annotate(
        wait=ExpressionWrapper(F("created_at") - F("job__submitted_at"), output_field=DurationField()))
    return [(at.timestamp(), queue_id, state, wait.total_seconds())
            for at, queue_id, state, wait in events.values_list("created_at", "job__queue_id", "to_state", "wait")]


def _by_day(events: list[Event]) -> dict[dt.date, Tally]:
    days: dict[dt.date, list[Event]] = {}
    for event in events:
        days.setdefault(dt.datetime.fromtimestamp(event[0], dt.timezone.utc).date(), []).append(event)
    return {day: Tally().plus(day_events) for day, day_events in days.items()}


def queue_history(*, days: int = 7, now: dt.datetime | None = None) -> list[DayOfQueue]:
    """Rows by day, then queue: the stored ended days (one query; those missing read and stored once), yesterday from
    its events while it settles, then today."""
    now = (now or clock.now_datetime()).astimezone(dt.timezone.utc)
    today = now.date()
    settled = [today - dt.timedelta(days=back) for back in range(days - 1, 0, -1)
               if now - _day_start(today - dt.timedelta(days=back - 1)) >= dt.timedelta(seconds=SETTLED_AFTER_S)]
    stored = dict(HistoryDay.objects.filter(day__in=settled).values_list("day", "rows"))
    names = dict(Queue.objects.values_list("pk", "name"))
    missing = [day for day in settled if day not in stored]
    if missing:
        tallies = _by_day(_events(_day_start(missing[0]), _day_start(settled[-1] + dt.timedelta(days=1))))
        fresh = {day: [_stored(row) for row in tallies.get(day, Tally()).rows(day, names)] for day in missing}
        HistoryDay.objects.bulk_create([HistoryDay(day=day, rows=rows) for day, rows in fresh.items()], ignore_conflicts=True)
        stored.update(fresh)
    rows = [DayOfQueue(day=day, **row) for day in settled for row in stored[day]]
    since = settled[-1] + dt.timedelta(days=1) if settled else today - dt.timedelta(days=days - 1)
    if since < today:
        unsettled = _by_day(_events(_day_start(since), _day_start(today)))
        rows += [row for day in sorted(unsettled) for row in unsettled[day].rows(day, names)]
    return rows + _today(today, now).rows(today, names)


def _today(today: dt.date, now: dt.datetime) -> Tally:
    """Today's tally: its settled events as kept in the cache (read once), and those written since, read now."""
    settled_until = max(_day_start(today), now - dt.timedelta(seconds=SETTLED_AFTER_S))
    kept = cache.get(TODAY_KEY)
    if kept is None or kept[0] != today:
        kept = (today, _day_start(today), Tally())
    _, kept_until, tally = kept
    recent = _events(kept_until, _day_start(today + dt.timedelta(days=1)))
    if settled_until > kept_until:
        cut = settled_until.timestamp()
        tally = tally.plus([event for event in recent if event[0] < cut])
        cache.set(TODAY_KEY, (today, settled_until, tally), 2 * 24 * 3600)
        recent = [event for event in recent if event[0] >= cut]
    return tally.plus(recent)


def _stored(row: DayOfQueue) -> dict:
    return {key: value for key, value in asdict(row).items() if key != "day"}
