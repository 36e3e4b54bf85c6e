"""Usage reads: allocation vs use per team over a recent window, and the idle allocations (held, barely used)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.db.models import Avg, Count, Sum

from scheduling.models import GpuUsageSample, Job, Team
from scheduling.models.jobs import HOLDING_STATES
from scheduling.permissions import is_admin, team_ids_of
from scheduling.services.common import to_datetime

IDLE_UTIL_PERCENT = 10.0
"""A job whose GPUs averaged below this over the window is an idle allocation."""
WINDOW_S = 3600.0


@dataclass
class TeamUsage:
    team: str
    allocated_gpus: int
    """GPUs held now by the team's admitted and running jobs."""
    used_gpus: float
    """Mean over the window's collections of the sum of utilisation (0–1) of the team's GPUs."""
    idle_gpus: int
    """Allocated GPUs of the team's idle allocations."""

    @property
    def use_percent(self) -> float | None:
        return round(100.0 * self.used_gpus / self.allocated_gpus, 1) if self.allocated_gpus else None


@dataclass
class IdleAllocation:
    job_id: int
    job_name: str | None
    """None for jobs of teams the reader is not in (as everywhere else)."""
    team: str
    gpus: int
    mean_util_percent: float


@dataclass
class UsageReport:
    window_s: float
    collections: int
    """Sample rounds inside the window; 0 means no usage data yet."""
    teams: list[TeamUsage] = field(default_factory=list)
    idle: list[IdleAllocation] = field(default_factory=list)
    idle_threshold_percent: float = IDLE_UTIL_PERCENT


def usage_report(*, user, now: float | None = None, window_s: float = WINDOW_S) -> UsageReport:
    """Four queries whatever the fleet's size: collections, use per team, allocation per team, use per held job."""
    now = time.time() if now is None else now
    window = GpuUsageSample.objects.filter(at__gt=to_datetime(now - window_s), at__lte=to_datetime(now))
    collections = window.values("at").distinct().count()
    used = {row["team"]: (row["util"] or 0.0) for row in window.exclude(team=None).values("team").annotate(util=Sum("util_percent"))}
    allocated = dict(Job.objects.filter(state__in=HOLDING_STATES).values("queue__team").annotate(gpus=Sum("gpus")).values_list("queue__team", "gpus"))
    held = {
        row["id"]: row
        for row in Job.objects.filter(state__in=HOLDING_STATES).values("id", "name", "gpus", "queue__team_id", "queue__team__name")
    }
    per_job = window.filter(job_id__in=list(held)).values("job").annotate(util=Avg("util_percent"), n=Count("id"))
    visible_teams = None if is_admin(user) else team_ids_of(user)
    idle, idle_gpus = [], {}
    for row in per_job:
        if row["util"] is None or row["util"] >= IDLE_UTIL_PERCENT:
            continue
        job = held[row["job"]]
        idle_gpus[job["queue__team_id"]] = idle_gpus.get(job["queue__team_id"], 0) + job["gpus"]
        is_visible = visible_teams is None or job["queue__team_id"] in visible_teams
        idle.append(IdleAllocation(job_id=job["id"], job_name=job["name"] if is_visible else None, team=job["queue__team__name"],
                                   gpus=job["gpus"], mean_util_percent=round(row["util"], 1)))
    teams = [
        TeamUsage(
            team=team.name,
            allocated_gpus=allocated.get(team.pk, 0),
            used_gpus=round(used.get(team.pk, 0.0) / 100.0 / collections, 2) if collections else 0.0,
            idle_gpus=idle_gpus.get(team.pk, 0),
        )
        for team in Team.objects.order_by("name")
    ]
    idle.sort(key=lambda a: (-a.gpus, a.mean_util_percent, a.job_id))
    return UsageReport(window_s=window_s, collections=collections, teams=teams, idle=idle)
