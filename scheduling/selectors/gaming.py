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
from scheduling.models import IdleJob, Job, JobEvent, PriorityClass, Team
from scheduling.models.jobs import HOLDING_STATES
from scheduling.selectors.splitting import submission_tallies
from scheduling.services.common import to_datetime

WINDOW_S = 7 * 24 * 3600.0
"""Signals over submissions and cancellations look back a week (the fair-share half-life)."""

RULES = {
    "splitting": "Fair share counts GPU-hours over every job of the team (dominant share, decayed usage): eight 8-GPU "
                 "pieces weigh what one 64-GPU job weighs, so splitting buys no extra share.",
    "idle": "A job below the idle threshold for the grace period is flagged idle: it is the first victim of any blocked "
            "job of its cohort, whatever its priority, and its held GPU-hours count in the team's fair-share usage.",
    "placeholders": "A placeholder that starts and idles is flagged idle after the grace period and reclaimed first; the "
                    "GPU-hours it held count in fair share, so holding a place costs the team its share.",
    "priority": "Researchers choose admin-set priority classes only; each class lists the teams that may use it and "
                "caps the GPUs a team runs at it. Jobs over the cap wait (reason priority_class).",
    "borrowed_uncheckpointed": "Lent GPUs go first to jobs that checkpoint or stay within their quota: by default "
                               "(uncheckpointed_borrowers_last) a queue whose next job would borrow without checkpoints "
                               "is served after every other while a job that checkpoints waits. Borrowed GPUs are "
                               "reclaimable by their owner at the borrowing job's displacement cost; a job on borrowed "
                               "quota without checkpoints loses its whole run when reclaimed, and is marked at risk on its "
                               "page (an admin may have such jobs reclaimed unweighed after a while: "
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
    """Node-sized jobs submitted in bursts of two or more of one shape by one person (within splitting.BURST_S)."""
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
    """Every team's signals (or `team`'s), by team name: one grouped query per signal over all teams whatever the number
    of jobs; the week's submissions from their stored settled hours and the window's two ends (selectors.splitting)."""
    now = clock.moment(now)
    since = now - WINDOW_S
    teams = Team.objects.order_by("name").annotate(queue_count=Count("queues"))
    if team is not None:
        teams = teams.filter(name=team)
    rows = list(teams.values_list("id", "name", "queue_count"))
    names = {team_id: name for team_id, name, _ in rows}
    signals = {name: TeamSignals(team=name, queues=queues) for _, name, queues in rows}
    team_ids = None if team is None else list(names)
    in_teams = _of_teams(team_ids)
    for team_id, (jobs, gpus, split_jobs, split_gpus) in submission_tallies(since=since, now=now, team_ids=team_ids).items():
        s = signals[names[team_id]]
        s.jobs_submitted, s.gpus_submitted, s.split_jobs, s.split_gpus = jobs, gpus, split_jobs, split_gpus
    holding = Job.objects.filter(in_teams, state__in=HOLDING_STATES)
    idle = IdleJob.objects.filter(job__state__in=HOLDING_STATES).filter(_of_teams(team_ids, "job__queue__team_id"))
    for team_id, count, gpus in (idle.values("job__queue__team_id")
                                 .annotate(n=Count("job_id"), g=Sum("job__gpus")).values_list("job__queue__team_id", "n", "g")):
        signals[names[team_id]].idle_jobs, signals[names[team_id]].idle_gpus = count, gpus or 0
    cancelled = (JobEvent.objects.filter(to_state=JobState.CANCELLED.value, from_state__in=HOLDING_STATES, created_at__gte=to_datetime(since))
                 .filter(_of_teams(team_ids, "job__queue__team_id"))
                 .values("job__queue__team_id").annotate(n=Count("id")).values_list("job__queue__team_id", "n"))
    for team_id, count in cancelled:
        signals[names[team_id]].placeholder_cancellations = count
    caps = _caps_above_default()
    for team_id, class_name, gpus in (holding.filter(priority_class__name__in=list(caps)).values("queue__team_id", "priority_class__name")
                                      .annotate(g=Sum("gpus")).values_list("queue__team_id", "priority_class__name", "g")):
        signals[names[team_id]].class_gpus[class_name] = gpus or 0
    for s in signals.values():
        s.class_caps = caps
    for team_id, gpus, started in (holding.filter(is_borrowing=True, checkpoint_interval_s__isnull=True, started_at__isnull=False)
                                   .values_list("queue__team_id", "gpus", "started_at")):
        s = signals[names[team_id]]
        s.borrowed_uncheckpointed_jobs += 1
        s.borrowed_uncheckpointed_gpu_hours += gpus * max(0.0, now - started.timestamp()) / 3600.0
    return list(signals.values())


def _of_teams(team_ids: list[int] | None, team_path: str = "queue__team_id") -> Q:
    return Q() if team_ids is None else Q(**{f"{team_path}__in": team_ids})


def _caps_above_default() -> dict[str, int | None]:
    """Each priority class above the default (the first default class in the classes' order) with its per-team cap."""
    classes = list(PriorityClass.objects.values_list("name", "value", "is_default", "max_gpus_per_team"))
    default_value = next((value for _, value, is_default, _ in classes if is_default), None) or 0
    return {name: cap for name, value, _, cap in classes if value > default_value}
