"""Borrowed quota held long without checkpoints: at risk, and reclaimed at the borrower's displacement cost.

A team may keep long jobs without checkpoints on quota it borrowed, betting that the value rule (core.payoff)
will never find a reclaim worth a whole lost run, so the owner cannot get its quota back cheaply ("squatting").
The quota contract says borrowed GPUs are the owner's to take back. Under the admin's policy
`SchedulerConfig.reclaim_at_cost_after_s` (off by default: docs/gaming.md), once a job has run on borrowed quota
without checkpoints that long, a plan whose victims are all such jobs
(or idle ones, core.idle) is not weighed. It still costs the victims' displacement (shown, and approved
by an admin when it crosses teams or the threshold); the borrower was told: its job's page marks it at risk.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.core.idle import is_flagged_idle
from scheduling.core.model import Job, SchedulerConfig


def is_at_risk(*, is_borrowing: bool, checkpoint_interval_s: int | None, running_s: float, after_s: float | None) -> bool:
    """Runs on borrowed quota without checkpoints for `after_s` or longer (None: the rule is off)."""
    return after_s is not None and is_borrowing and not checkpoint_interval_s and running_s >= after_s


def is_reclaimable_at_cost(victim: Job, job: Job, now: float, config: SchedulerConfig) -> bool:
    """Taken without weighing: idle, or a borrower of another queue at risk (a reclaim candidate borrows)."""
    if is_flagged_idle(victim, now, config.idle_grace_s):
        return True
    running_s = now - victim.started_at if victim.started_at is not None else 0.0
    return victim.queue != job.queue and is_at_risk(is_borrowing=True, checkpoint_interval_s=victim.checkpoint_interval_s,
                                                    running_s=running_s, after_s=config.reclaim_at_cost_after_s)


def all_reclaimable_at_cost(victims: Iterable[Job], job: Job, now: float, config: SchedulerConfig) -> bool:
    victims = list(victims)
    return bool(victims) and all(is_reclaimable_at_cost(victim, job, now, config) for victim in victims)
