"""Quota what-ifs: a team lead's proposed queue change previewed as two forecasts, before and after, per team and per
job, with the running jobs of other queues that the change would make reclaimable (the core's reclaim rule)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from scheduling.core.model import Queue, Snapshot
from scheduling.core.preemption import preemption_candidates
from scheduling.core.quota import QuotaLedger
from scheduling.planning.forecast import DEFAULT_HORIZON_S, Forecast, forecast


@dataclass(frozen=True)
class TeamWait:
    team: str
    pending_jobs: int
    mean_wait_s: float | None
    """Mean of (estimated start − now) over the team's pending jobs, a job beyond the horizon counted at the horizon."""
    beyond_horizon: int


@dataclass(frozen=True)
class Reclaimable:
    job_id: int
    queue: str
    team: str
    gpus: int
    flavor: str


@dataclass(frozen=True)
class WhatIf:
    now: float
    horizon_s: float
    before: Forecast
    after: Forecast
    teams_before: tuple[TeamWait, ...]
    teams_after: tuple[TeamWait, ...]
    jobs: tuple[tuple[int, float | None, float | None], ...]
    """The changed queues' pending jobs: (job id, estimated start before, after)."""
    reclaimable: tuple[Reclaimable, ...]
    """Running jobs of other queues that the change makes reclaimable by the changed queues (the core's reclaim rule)."""

    def to_dict(self) -> dict:
        def team_rows(rows):
            return {r.team: {"pending_jobs": r.pending_jobs, "mean_wait_s": _round(r.mean_wait_s), "beyond_horizon": r.beyond_horizon}
                    for r in rows}

        before, after = team_rows(self.teams_before), team_rows(self.teams_after)
        return {
            "now": self.now,
            "horizon_s": self.horizon_s,
            "teams": [
                {"team": team, "before": before.get(team), "after": after.get(team)} for team in sorted(set(before) | set(after))
            ],
            "jobs": [
                {"id": job_id, "estimated_start_before": b, "estimated_start_after": a,
                 "wait_before_s": _round(None if b is None else b - self.now), "wait_after_s": _round(None if a is None else a - self.now)}
                for job_id, b, a in self.jobs
            ],
            "reclaimable": [
                {"job": r.job_id, "queue": r.queue, "team": r.team, "gpus": r.gpus, "flavor": r.flavor} for r in self.reclaimable
            ],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def what_if(snapshot: Snapshot, changed_queues: Mapping[str, Queue], *, horizon_s: float = DEFAULT_HORIZON_S) -> WhatIf:
    """Predicted waits per team and the changed queues' job estimates, before vs after replacing `changed_queues`."""
    queues = dict(snapshot.queues)
    queues.update(changed_queues)
    proposed = replace(snapshot, queues=queues)
    before = forecast(snapshot, horizon_s=horizon_s)
    after = forecast(proposed, horizon_s=horizon_s)
    changed = set(changed_queues)
    jobs = tuple(
        (job.id, before.starts.get(job.id), after.starts.get(job.id))
        for job in sorted(snapshot.pending, key=lambda j: (j.queue, *j.queue_order))
        if job.queue in changed
    )
    reclaimable_before = _reclaimable(snapshot, changed)
    reclaimable_after = _reclaimable(proposed, changed)
    newly = tuple(r for r in reclaimable_after if r.job_id not in {x.job_id for x in reclaimable_before})
    return WhatIf(
        now=snapshot.now,
        horizon_s=horizon_s,
        before=before,
        after=after,
        teams_before=_team_waits(snapshot, before),
        teams_after=_team_waits(proposed, after),
        jobs=jobs,
        reclaimable=newly,
    )


def _team_waits(snapshot: Snapshot, result: Forecast) -> tuple[TeamWait, ...]:
    waits: dict[str, list[float]] = {}
    beyond: dict[str, int] = {}
    for job in snapshot.pending:
        start = result.starts.get(job.id)
        waits.setdefault(job.team, []).append(result.horizon_s if start is None else start - result.now)
        if start is None:
            beyond[job.team] = beyond.get(job.team, 0) + 1
    return tuple(
        TeamWait(team, len(values), sum(values) / len(values) if values else None, beyond.get(team, 0))
        for team, values in sorted(waits.items())
    )


def _reclaimable(snapshot: Snapshot, changed: set[str]) -> tuple[Reclaimable, ...]:
    """Running jobs of other queues that the core may take for a changed queue's smallest pending job of each flavor
    (preemption.preemption_candidates: borrowing in its cohort, preemptible, and only for a job within nominal; or
    flagged idle, whatever the quotas say, so never one a change makes reclaimable)."""
    ledger = QuotaLedger(snapshot.queues, snapshot.admitted)
    found: dict[int, Reclaimable] = {}
    for name in sorted(changed):
        queue = snapshot.queues.get(name)
        if queue is None:
            continue
        for flavor in queue.quotas:
            smallest = min((j for j in snapshot.pending if j.queue == name and j.flavor == flavor),
                           key=lambda j: (j.gpus, j.queue_order), default=None)
            if smallest is None:
                continue
            for job in preemption_candidates(smallest, snapshot.queues, snapshot.admitted, ledger, protected=set(),
                                             now=snapshot.now, config=snapshot.config):
                if job.queue != name:
                    found[job.id] = Reclaimable(job.id, job.queue, job.team, job.gpus, flavor)
    return tuple(found[k] for k in sorted(found))
