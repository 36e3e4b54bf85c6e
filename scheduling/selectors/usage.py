"""Usage reads: allocation vs use per team over a window, use over time per team, queue, flavor or job (from the
queues' and jobs' rollups), and the idle allocations (held for longer than the grace period, used below the
threshold all that time, as the last collection found)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import FloatField, Func, Sum

from scheduling import clock
from scheduling.models import Flavor, IdleJob, Queue, QueueUsageRollup, Team, UsageRollup
from scheduling.models.jobs import HOLDING_STATES
from scheduling.permissions import is_admin, team_ids_of
from scheduling.services.common import to_datetime
from scheduling.usage.rollup import UsePoint, use_percent, use_series

WINDOW_S = 3600.0
WINDOWS = {"1h": (3600, 60), "24h": (24 * 3600, 15 * 60), "7d": (7 * 24 * 3600, 3600)}
"""Chart windows: (length, bin width) in seconds."""
GROUPINGS = {"team": ("team_id", Team), "queue": ("queue_id", Queue), "flavor": ("flavor_id", Flavor)}
"""Use over time per: the rollups' column, and the model whose names label the series."""


@dataclass
class TeamUsage:
    team: str
    allocated_gpus: float
    """Mean GPUs the team's jobs held over the window."""
    used_gpus: float
    """Mean utilisation-weighted GPUs they used over the window (never above allocated)."""
    idle_gpus: int
    """GPUs held now by the team's idle allocations."""

    @property
    def use_percent(self) -> float | None:
        return use_percent(self.used_gpus, self.allocated_gpus)


@dataclass
class IdleAllocation:
    job_id: int
    job_name: str | None
    """None for jobs of teams the reader is not in (as everywhere else)."""
    team: str
    queue: str
    gpus: int
    mean_util_percent: float
    idle_since_s: float
    """When the job was admitted: it has been below the threshold for at least the grace period since."""


@dataclass
class UsageReport:
    window_s: float
    collections: int
    """Minutes with use data inside the window; 0 means no usage data yet."""
    teams: list[TeamUsage] = field(default_factory=list)
    idle: list[IdleAllocation] = field(default_factory=list)
    idle_threshold_percent: float = 10.0
    idle_grace_s: float = 600.0


@dataclass
class UsageSeries:
    """Use over time of one team, queue, flavor or job: mean GPUs allocated and used per bin."""

    name: str
    points: list[UsePoint]
    allocated_gpu_s: float
    used_gpu_s: float
    step_s: float

    @property
    def use_percent(self) -> float | None:
        return use_percent(self.used_gpu_s, self.allocated_gpu_s)

    @property
    def mean_allocated_gpus(self) -> float:
        """Over the bins in which it held GPUs (a job admitted ten minutes ago held 384, not 64 over the hour)."""
        held = [p for p in self.points if p.allocated_gpus]
        return round(sum(p.allocated_gpus for p in held) / max(1, len(held)), 1)

    @property
    def mean_used_gpus(self) -> float:
        held = [p for p in self.points if p.allocated_gpus]
        return round(sum(p.used_gpus for p in held) / max(1, len(held)), 1)

    def chart(self) -> dict:
        """What usage.js draws. The bins' times as the first one's start and the step (spelled out in each of the
        fleet page's fifty charts, the same sixty times were half the page)."""
        return {
            "name": self.name,
            "start": _iso(self.points[0].start_s),
            "step_s": self.step_s,
            "allocated": [p.allocated_gpus for p in self.points],
            "used": [p.used_gpus for p in self.points],
        }


class Epoch(Func):
    """A timestamp as seconds since 1970, computed by the database: thousands of chart rows, no datetime object each."""

    output_field = FloatField()
    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)"

    def as_sqlite(self, compiler, connection, **extra):
        # julianday is a double of days: seconds from it come out some microseconds off, often just before the minute
        # a rollup starts (a bin early). To the millisecond they are exact.
        return self.as_sql(compiler, connection, template="ROUND((julianday(%(expressions)s) - 2440587.5) * 86400.0, 3)", **extra)


@functools.lru_cache(maxsize=4096)
def _iso(start_s: float) -> str:
    """A bin's start as the charts read it; every series of a page has the same bins."""
    return to_datetime(start_s).isoformat()


def _window(now: float | None, window_s: float, rollups=QueueUsageRollup):
    now = clock.moment(now)
    return now, rollups.objects.filter(start__gte=to_datetime(now - window_s), start__lte=to_datetime(now))


def idle_allocations(*, user) -> list[IdleAllocation]:
    """Jobs holding GPUs since before the grace period whose use over the whole grace period is below the threshold,
    as the last usage collection found them (IdleJob), of those still holding GPUs."""
    visible_teams = None if is_admin(user) else team_ids_of(user)
    idle = []
    for row in IdleJob.objects.filter(job__state__in=HOLDING_STATES).values(
        "job_id", "mean_util_percent", "since", "job__name", "job__gpus", "job__queue__team_id",
        "job__queue__team__name", "job__queue__name",
    ):
        is_visible = visible_teams is None or row["job__queue__team_id"] in visible_teams
        idle.append(IdleAllocation(
            job_id=row["job_id"], job_name=row["job__name"] if is_visible else None, team=row["job__queue__team__name"],
            queue=row["job__queue__name"], gpus=row["job__gpus"], mean_util_percent=row["mean_util_percent"],
            idle_since_s=row["since"].timestamp(),
        ))
    idle.sort(key=lambda a: (-a.gpus, a.mean_util_percent, a.job_id))
    return idle


def usage_report(*, user, now: float | None = None, window_s: float = WINDOW_S) -> UsageReport:
    """Four small queries whatever the fleet's size (the queues' rollups, the idle jobs, the teams)."""
    now, window = _window(now, window_s)
    collections = window.values("start").distinct().count()
    covered_s = min(window_s, collections * 60.0) or window_s  # means over the minutes with data: a fresh install has only a few
    per_team = {
        row["team_id"]: row
        for row in window.exclude(team=None).values("team_id").annotate(allocated=Sum("allocated_gpu_s"), used=Sum("used_gpu_s")).order_by()
    }
    idle = idle_allocations(user=user)
    idle_gpus: dict[str, int] = {}
    for allocation in idle:
        idle_gpus[allocation.team] = idle_gpus.get(allocation.team, 0) + allocation.gpus
    teams = []
    for team in Team.objects.order_by("name"):
        row = per_team.get(team.pk, {"allocated": 0.0, "used": 0.0})
        teams.append(TeamUsage(team=team.name, allocated_gpus=round(row["allocated"] / covered_s, 2),
                               used_gpus=round(row["used"] / covered_s, 2), idle_gpus=idle_gpus.get(team.name, 0)))
    return UsageReport(window_s=window_s, collections=collections, teams=teams, idle=idle,
                       idle_threshold_percent=settings.GANGWAY_IDLE_THRESHOLD_PERCENT, idle_grace_s=settings.GANGWAY_IDLE_GRACE_S)


def usage_over_time(*, by: str, window: str, team: str | None = None, now: float | None = None) -> list[UsageSeries]:
    """One series per team, queue or flavor (`by`) over the window ("1h", "24h", "7d"), busiest first; only the
    use of `team`'s jobs if given. Team totals are not secret: every reader sees every team's use, as on the fleet page."""
    window_s, step_s = WINDOWS[window]
    now, rows = _window(now, window_s)
    if team is not None:
        rows = rows.filter(team__name=team)
    key, model = GROUPINGS[by]
    names = dict(model.objects.values_list("pk", "name"))
    grouped: dict[str, list[tuple[float, float, float]]] = {}
    for group, start_s, allocated, used in (rows.exclude(**{key: None}).values(key, "start")
                                            .annotate(start_s=Epoch("start"), allocated=Sum("allocated_gpu_s"), used=Sum("used_gpu_s"))
                                            .order_by().values_list(key, "start_s", "allocated", "used")):
        grouped.setdefault(names.get(group, f"#{group}"), []).append((start_s, allocated, used))
    series = [_series(name, group_rows, now=now, window_s=window_s, step_s=step_s) for name, group_rows in grouped.items()]
    series.sort(key=lambda s: (-s.allocated_gpu_s, s.name))
    return series


def job_usage_over_time(*, job_id: int, window: str, now: float | None = None) -> UsageSeries:
    window_s, step_s = WINDOWS[window]
    now, rows = _window(now, window_s, rollups=UsageRollup)
    job_rows = [
        (row["start"].timestamp(), row["allocated"], row["used"])
        for row in rows.filter(job_id=job_id).values("start").annotate(allocated=Sum("allocated_gpu_s"), used=Sum("used_gpu_s")).order_by()
    ]
    return _series(f"job {job_id}", job_rows, now=now, window_s=window_s, step_s=step_s)


def _series(name: str, rows: list[tuple[float, float, float]], *, now: float, window_s: float, step_s: float) -> UsageSeries:
    return UsageSeries(
        name=name, points=use_series(rows, since_s=now - window_s, until_s=now, step_s=step_s),
        allocated_gpu_s=sum(r[1] for r in rows), used_gpu_s=sum(min(r[2], r[1]) for r in rows), step_s=step_s,
    )
