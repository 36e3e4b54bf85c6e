"""Allocation vs use as GPU-seconds: one collection's share per job, and time series binned from stored rollups.

Use is GPU-seconds used ÷ GPU-seconds allocated over the same window. Both come from the same collections,
and a job's used GPUs are capped at the GPUs it holds, so use can never exceed 100 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping


@dataclass(frozen=True)
class JobUse:
    """One job in one collection: the GPUs it held and the utilisation-weighted GPUs it used (≤ held)."""

    job_id: int
    allocated_gpus: int
    used_gpus: float


def job_uses(allocated_gpus: Mapping[int, int], util_percents: Mapping[int, Iterable[float]]) -> list[JobUse]:
    """Per held job: used = Σ utilisation / 100 over its samples, at most what it holds (a metrics source may
    report a GPU twice, or a GPU the job does not hold); a held job without samples used nothing."""
    uses = []
    for job_id, gpus in sorted(allocated_gpus.items()):
        if gpus <= 0:
            continue
        used = sum(min(100.0, max(0.0, util)) for util in util_percents.get(job_id, ())) / 100.0
        uses.append(JobUse(job_id=job_id, allocated_gpus=gpus, used_gpus=min(float(gpus), used)))
    return uses


def use_percent(used_gpu_s: float, allocated_gpu_s: float) -> float | None:
    """None when nothing was allocated (no use to speak of, rather than 0 %)."""
    if allocated_gpu_s <= 0:
        return None
    return round(100.0 * min(used_gpu_s, allocated_gpu_s) / allocated_gpu_s, 1)


@dataclass(frozen=True)
class UsePoint:
    """One bin of a series: mean GPUs allocated and used over `step_s` seconds from `start_s`."""

    start_s: float
    allocated_gpus: float
    used_gpus: float

    @property
    def use_percent(self) -> float | None:
        return use_percent(self.used_gpus, self.allocated_gpus)


def use_series(
    rows: Iterable[tuple[float, float, float]], *, since_s: float, until_s: float, step_s: float
) -> list[UsePoint]:
    """Bin (bucket start, allocated GPU-s, used GPU-s) rows into every `step_s` bin of [since_s, until_s);
    bins without rows are zeros, so a chart shows the gap instead of joining across it."""
    first = since_s - since_s % step_s
    count = max(1, int(-(-(until_s - first) // step_s)))
    allocated = [0.0] * count
    used = [0.0] * count
    for start_s, allocated_gpu_s, used_gpu_s in rows:
        index = int((start_s - first) // step_s)
        if 0 <= index < count:
            allocated[index] += allocated_gpu_s
            used[index] += min(used_gpu_s, allocated_gpu_s)
    return [
        UsePoint(start_s=first + i * step_s, allocated_gpus=round(allocated[i] / step_s, 2), used_gpus=round(used[i] / step_s, 2))
        for i in range(count)
    ]
