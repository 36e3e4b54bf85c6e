"""Gaming signals per team, for admins: how a team might be gaming the scheduler, each beside the rule that acts on it.

A signal is evidence, not a verdict: a team that submits many 8-GPU jobs at once may just run a sweep. What matters
is that every signal names the defence that makes the strategy pay nothing (docs/gaming.md), so an admin reading a
high number knows whether anything is left to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q, Sum

from scheduling import clock
from scheduling.core.model import JobState
from scheduling.models import IdleJob, Job, JobEvent, PriorityClass, Queue, Team
from scheduling.models.jobs import HOLDING_STATES
from scheduling.services.common import to_datetime

WINDOW_S = 7 * 24 * 3600.0
"""Signals over submissions and cancellations look back a week (the fair-share half-life)."""
BURST_S = 60.0
"""Jobs of one shape one person submits within this many seconds of each other count as pieces of one split job."""
NODE_GPUS = 8

RULES = {
    "splitting": "Fair share counts GPU-hours over every job of the team (dominant share, decayed usage): eight 8-GPU "
                 "pieces weigh what one 64-GPU job weighs, so splitting buys no extra share.",
    "idle": "A job below the idle threshold for the grace period is flagged idle: it is the first victim of any blocked "
            "job of its cohort, whatever its priority, and its held GPU-hours count in the team's fair-share usage.",
    "placeholders": "A placeholder that starts and idles is flagged idle after the grace period and reclaimed first; the "
                    "GPU-hours it held count in fair share, so holding a place costs the team its share.",
    "priority": "Researchers choose admin-set priority classes only; each class lists the teams that may use it and "
                "caps the GPUs a team runs at it. Jobs over the cap wait (reason priority_class).",
    "borrowed_uncheckpointed": "Borrowed GPUs are reclaimable by their owner at the borrowing job's displacement cost; a job "
                               "on borrowed quota without checkpoints loses its whole run when reclaimed, and is marked "
                               "at risk on its page (an admin may have such jobs reclaimed unweighed after a while: "
                               "reclaim_at_cost_after_s).",
    "queues": "A team's queues share one fair-share account: its usage and share are summed over its queues, so more "
              "queues do not add weight.",
}


@dataclass
class TeamSignals:
    team: str
    queues: int = 0
    jobs_submitted: int = 0
    split_jobs: int = 0
    """Node-sized jobs submitted in bursts of two or more of one shape by one person (within BURST_S)."""
    gpus_submitted: int = 0
    split_gpus: int = 0
    idle_jobs: int = 0
    idle_gpus: int = 0
    placeholder_cancellations: int = 0
    """Jobs cancelled by a person after they had been admitted (they held GPUs, then were given up)."""
    class_gpus: dict[str, int] = field(default_factory=dict)
    """GPUs the team runs now per priority class above the default."""
    class_caps: dict[str, int | None] = field(default_factory=dict)
    borrowed_uncheckpointed_gpu_hours: float = 0.0
    """GPU-hours run so far by the team's jobs holding borrowed quota now, without checkpoints."""
    borrowed_uncheckpointed_jobs: int = 0

    @property
    def splitting_ratio(self) -> float:
        return self.split_gpus / self.gpus_submitted if self.gpus_submitted else 0.0

    @property
    def class_use(self) -> list[tuple[str, int, int | None]]:
        """(class, GPUs running at it now, its per-team cap) for the classes above the default the team uses."""
        return [(name, gpus, self.class_caps.get(name)) for name, gpus in sorted(self.class_gpus.items())]


def gaming_signals(*, now: float | None = None, team: str | None = None) -> list[TeamSignals]:
    """Every team's signals (or `team`'s), by team name. A handful of grouped queries whatever the number of jobs,
    except the splitting scan, which reads the id, owner, shape and time of the window's node-sized jobs."""
    now = clock.moment(now)
    since = to_datetime(now - WINDOW_S)
    teams = Team.objects.order_by("name")
    if team is not None:
        teams = teams.filter(name=team)
    signals = {name: TeamSignals(team=name) for name in teams.values_list("name", flat=True)}
    in_teams = Q(queue__team__name__in=list(signals))
    for name, count in Queue.objects.filter(team__name__in=list(signals)).values("team__name").annotate(n=Count("id")).values_list("team__name", "n"):
        signals[name].queues = count
    submitted = Job.objects.filter(in_teams, submitted_at__gte=since)
    for name, count, gpus in submitted.values("queue__team__name").annotate(n=Count("id"), g=Sum("gpus")).values_list("queue__team__name", "n", "g"):
        signals[name].jobs_submitted, signals[name].gpus_submitted = count, gpus or 0
    _count_split(signals, submitted)
    for name, count, gpus in (IdleJob.objects.filter(job__state__in=HOLDING_STATES, job__queue__team__name__in=list(signals))
                              .values("job__queue__team__name").annotate(n=Count("job_id"), g=Sum("job__gpus"))
                              .values_list("job__queue__team__name", "n", "g")):
        signals[name].idle_jobs, signals[name].idle_gpus = count, gpus or 0
    cancelled = (JobEvent.objects.filter(to_state=JobState.CANCELLED.value, from_state__in=HOLDING_STATES, created_at__gte=since,
                                         job__queue__team__name__in=list(signals))
                 .values("job__queue__team__name").annotate(n=Count("id")).values_list("job__queue__team__name", "n"))
    for name, count in cancelled:
        signals[name].placeholder_cancellations = count
    default_value = PriorityClass.objects.filter(is_default=True).values_list("value", flat=True).first() or 0
    caps = dict(PriorityClass.objects.filter(value__gt=default_value).values_list("name", "max_gpus_per_team"))
    holding = Job.objects.filter(in_teams, state__in=HOLDING_STATES)
    for name, class_name, gpus in (holding.filter(priority_class__name__in=list(caps)).values("queue__team__name", "priority_class__name")
                                   .annotate(g=Sum("gpus")).values_list("queue__team__name", "priority_class__name", "g")):
        signals[name].class_gpus[class_name] = gpus or 0
    for s in signals.values():
        s.class_caps = caps
    for name, gpus, started in (holding.filter(is_borrowing=True, checkpoint_interval_s__isnull=True, started_at__isnull=False)
                                .values_list("queue__team__name", "gpus", "started_at")):
        signals[name].borrowed_uncheckpointed_jobs += 1
        signals[name].borrowed_uncheckpointed_gpu_hours += gpus * max(0.0, now - started.timestamp()) / 3600.0
    return list(signals.values())


def _count_split(signals: dict[str, TeamSignals], submitted) -> None:
    """Node-sized jobs of one person and one flavor submitted within BURST_S of the previous such job count as pieces."""
    last: dict[tuple, float] = {}
    counted: set[int] = set()
    rows = (submitted.filter(gpus=NODE_GPUS).order_by("owner_id", "flavor_id", "queue__team_id", "submitted_at", "id")
            .values_list("id", "owner_id", "flavor_id", "queue__team__name", "submitted_at", "gpus"))
    previous: dict[tuple, int] = {}
    for job_id, owner, flavor, team_name, submitted_at, gpus in rows:
        key = (owner, flavor, team_name)
        at = submitted_at.timestamp()
        if key in last and at - last[key] <= BURST_S:
            for piece in (previous[key], job_id):
                if piece not in counted:
                    counted.add(piece)
                    signals[team_name].split_jobs += 1
                    signals[team_name].split_gpus += gpus
        last[key], previous[key] = at, job_id

