"""Submissions and split pieces per team over the gaming window, without reading the whole window on every view.

The splitting signal counts the week's submissions of each team and, among its node-sized ones, the pieces: jobs of
one person, flavor and team submitted within BURST_S of the previous such job. Read directly, that is every submission
of the week on each view (200,000 rows at 100,000 pending: two scans of ~250 ms, /gaming/ at ~1 s).

A submission does not change once written (its team, size, owner and time are fixed), so an hour whose jobs and
neighbours have all been written is counted once and stored (SubmissionHour with its teams' SubmissionTally rows, for
every web worker and restart, as HistoryDay is for the history page). A view sums the stored hours in one grouped
query and counts only the two ends of the window from the jobs: its first hour (its pieces may pair with jobs just
before the window, which do not count) and the hour or so not yet settled. Both ends are counted by the same pairing
as the stored hours, so the figures are those of one scan of the window. Kept counters updated at submit would need
every writer of jobs (submit, cluster discovery, bulk loads) to keep them; a rollup refreshed in the background would
show figures some minutes old and need a worker; settled hours are exact, filled by whoever looks first (the first
view after a deploy counts the week once), and cost a view two hours of rows whatever the queue.

A stored hour keeps the team each job's queue had when it was counted, as the usage rollups do: a queue moved to
another team (possible only in the Django admin) leaves the hours counted before with its former team."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncHour

from scheduling.models import Job, SubmissionHour, SubmissionTally
from scheduling.services.common import to_datetime

BURST_S = 60.0
"""Jobs of one shape one person submits within this many seconds of each other count as pieces of one split job."""
NODE_GPUS = 8
HOUR_S = 3600
SETTLED_AFTER_S = 600
"""Submissions older than this are all written: one stamped before waiting on the pass's lock has committed."""

Tally = list[int]
"""[jobs, GPUs, split pieces, their GPUs]."""


def submission_tallies(*, since: float, now: float, team_ids: Iterable[int] | None = None) -> dict[int, Tally]:
    """Per team id (of `team_ids`, or every team), the jobs submitted at or after `since` and their split pieces."""
    first = math.ceil((since + BURST_S) / HOUR_S) * HOUR_S  # from this hour on, a piece's earlier neighbour is in the window
    settled = math.floor((now - SETTLED_AFTER_S - BURST_S) / HOUR_S) * HOUR_S  # hours ending here have their next neighbours
    wanted = None if team_ids is None else set(team_ids)
    if settled <= first:
        return _counted(since=since, spans=[(since, None)], team_ids=wanted)
    tallies = _counted(since=since, spans=[(since, first), (settled, None)], team_ids=wanted)
    for team_id, tally in _stored(first, settled, wanted).items():
        _add(tallies.setdefault(team_id, [0, 0, 0, 0]), tally)
    return tallies


def _counted(*, since: float, spans: list[tuple[float, float | None]], team_ids: set[int] | None) -> dict[int, Tally]:
    """The tallies of the jobs submitted in `spans` ([start, end); end None: no end), read from the jobs."""
    in_spans = Q()
    around_spans = Q()  # with the neighbours that decide whether a job at a span's edge is a piece
    for start, end in spans:
        in_spans |= _span(start, end)
        around_spans |= _span(max(since, start - BURST_S), None if end is None else end + BURST_S)
    jobs = Job.objects.filter(in_spans)
    if team_ids is not None:
        jobs = jobs.filter(queue__team_id__in=team_ids)
    tallies: dict[int, Tally] = {}
    for team_id, count, gpus in jobs.values("queue__team_id").annotate(n=Count("id"), g=Sum("gpus")).values_list("queue__team_id", "n", "g"):
        tallies[team_id] = [count, gpus or 0, 0, 0]
    node_jobs = Job.objects.filter(around_spans, gpus=NODE_GPUS)
    if team_ids is not None:
        node_jobs = node_jobs.filter(queue__team_id__in=team_ids)
    for team_id, gpus, at in _split_pieces(node_jobs):
        if any(start <= at and (end is None or at < end) for start, end in spans):
            _add(tallies.setdefault(team_id, [0, 0, 0, 0]), [0, 0, 1, gpus])
    return tallies


def _span(start: float, end: float | None) -> Q:
    span = Q(submitted_at__gte=to_datetime(start))
    return span if end is None else span & Q(submitted_at__lt=to_datetime(end))


def _split_pieces(node_jobs) -> list[tuple[int, int, float]]:
    """(team id, GPUs, submitted at) of each piece among `node_jobs`: a job submitted within BURST_S of the previous
    job of its person, flavor and team is a piece, and so is that previous job."""
    last: dict[tuple, tuple[float, int, int]] = {}
    pieces: dict[int, tuple[int, int, float]] = {}
    rows = (node_jobs.order_by("owner_id", "flavor_id", "queue__team_id", "submitted_at", "id")
            .values_list("id", "owner_id", "flavor_id", "queue__team_id", "submitted_at", "gpus"))
    for job_id, owner, flavor, team_id, submitted_at, gpus in rows:
        key = (owner, flavor, team_id)
        at = submitted_at.timestamp()
        if key in last and at - last[key][0] <= BURST_S:
            previous_at, previous_id, previous_gpus = last[key]
            pieces[previous_id] = (team_id, previous_gpus, previous_at)
            pieces[job_id] = (team_id, gpus, at)
        last[key] = (at, job_id, gpus)
    return list(pieces.values())


def _stored(first: float, settled: float, team_ids: set[int] | None) -> dict[int, Tally]:
    """The tallies of the hours from `first` to `settled`, summed from the stored ones; those missing are counted from
    their jobs and stored first (every team's, in one transaction: an hour is stored with all its tallies or not)."""
    hours = SubmissionHour.objects.filter(start__gte=to_datetime(first), start__lt=to_datetime(settled))
    stored = {start.timestamp() for start in hours.values_list("start", flat=True)}
    missing = [float(start) for start in range(int(first), int(settled), HOUR_S) if start not in stored]
    if missing:
        fresh = _hours_counted(missing[0], missing[-1] + HOUR_S)
        tallies = [SubmissionTally(hour_id=to_datetime(start), team_id=team_id, jobs=jobs, gpus=gpus, split_jobs=split_jobs,
                                   split_gpus=split_gpus)
                   for start in missing for team_id, (jobs, gpus, split_jobs, split_gpus) in fresh.get(start, {}).items()]
        with transaction.atomic():  # concurrent views store the same figures: the second one's rows are ignored
            SubmissionHour.objects.bulk_create([SubmissionHour(start=to_datetime(start)) for start in missing], ignore_conflicts=True)
            SubmissionTally.objects.bulk_create(tallies, ignore_conflicts=True)
    stored_tallies = SubmissionTally.objects.filter(hour_id__gte=to_datetime(first), hour_id__lt=to_datetime(settled))
    if team_ids is not None:
        stored_tallies = stored_tallies.filter(team_id__in=team_ids)
    sums = (stored_tallies.values("team_id").annotate(j=Sum("jobs"), g=Sum("gpus"), sj=Sum("split_jobs"), sg=Sum("split_gpus"))
            .values_list("team_id", "j", "g", "sj", "sg"))
    return {team_id: list(tally) for team_id, *tally in sums}


def _hours_counted(start: float, end: float) -> dict[float, dict[int, Tally]]:
    """Every team's tally of each hour in [start, end), from the jobs."""
    hours: dict[float, dict[int, Tally]] = {}
    counted = (Job.objects.filter(_span(start, end)).annotate(hour=TruncHour("submitted_at", tzinfo=timezone.utc))
               .values("hour", "queue__team_id").annotate(n=Count("id"), g=Sum("gpus")).values_list("hour", "queue__team_id", "n", "g"))
    for hour, team_id, count, gpus in counted:
        _add(hours.setdefault(_epoch(hour), {}).setdefault(team_id, [0, 0, 0, 0]), [count, gpus or 0, 0, 0])
    for team_id, gpus, at in _split_pieces(Job.objects.filter(_span(start - BURST_S, end + BURST_S), gpus=NODE_GPUS)):
        if start <= at < end:
            hour = math.floor(at / HOUR_S) * HOUR_S
            _add(hours.setdefault(float(hour), {}).setdefault(team_id, [0, 0, 0, 0]), [0, 0, 1, gpus])
    return hours


def _epoch(hour) -> float:
    """TruncHour gives an aware datetime on PostgreSQL and may give a naive UTC one elsewhere."""
    return (hour if hour.tzinfo else hour.replace(tzinfo=timezone.utc)).timestamp()


def _add(tally: Tally, more: Tally) -> None:
    for k, value in enumerate(more):
        tally[k] += value


def submission_hours_forget(submitted_at: datetime) -> None:
    """A job written late for its submission time (found in the cluster, created earlier): the stored hours it falls in,
    or whose pieces it may pair with, and those after, are counted again."""
    SubmissionHour.objects.filter(start__gt=to_datetime(submitted_at.timestamp() - HOUR_S - BURST_S)).delete()
