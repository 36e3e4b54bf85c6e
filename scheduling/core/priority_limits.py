"""Per-team caps on the GPUs that may run at a priority class (Slurm's QOS GrpTRES, per account).

A class may carry a cap: each team may hold at most that many GPUs, over all flavors, in jobs of
the class at once. A job that would take its team over the cap waits (reason `priority_class`),
whatever quota and placement say; it does not preempt to get under the cap, and it is admitted as
soon as the team's jobs at that class free enough GPUs. Jobs without a class, and classes without
a cap, are not limited. The cap bounds how much of a team's work may jump ahead at a high class;
the team's quota still bounds how much it runs in all.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from scheduling.core.model import Job, PendingReason, Verdict


class PriorityClassLimits:
    """GPUs each team holds per capped class; the cycle adds and removes jobs as it admits and preempts."""

    def __init__(self, caps: Mapping[str, int], holding: Iterable[Job] = ()) -> None:
        self.caps = caps
        self.held: dict[tuple[str, str], int] = {}
        if caps:
            for job in holding:
                self.add(job)

    def held_gpus(self, team: str, priority_class: str) -> int:
        return self.held.get((team, priority_class), 0)

    def check(self, job: Job) -> Verdict | None:
        """None when the job stays within its class's cap; else why it waits, with the numbers."""
        if not self.caps or job.priority_class not in self.caps:
            return None
        cap, held = self.caps[job.priority_class], self.held_gpus(job.team, job.priority_class)
        if held + job.gpus <= cap:
            return None
        return PendingReason.PRIORITY_CLASS, cap_message(job, cap=cap, held_gpus=held)

    def add(self, job: Job) -> None:
        self._shift(job, job.gpus)

    def remove(self, job: Job) -> None:
        self._shift(job, -job.gpus)

    def _shift(self, job: Job, delta: int) -> None:
        if job.priority_class in self.caps:
            key = (job.team, job.priority_class)
            self.held[key] = self.held.get(key, 0) + delta


def cap_message(job: Job, *, cap: int, held_gpus: int) -> str:
    name = job.priority_class
    head = f"priority class {name}: team {job.team} runs {held_gpus} of its {cap} GPUs at {name}"
    if job.gpus > cap:
        return f"{head}; this job needs {job.gpus}, more than the cap: it can never start at {name}"
    return f"{head}; this job needs {job.gpus}, so it waits until {held_gpus + job.gpus - cap} of them are freed"
