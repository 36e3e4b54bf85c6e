"""Plausible GPU use for the simulated cluster: busy jobs, and the idle allocations a real fleet has."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from typing import Iterable

from .prometheus import GpuUsageSample

IDLE_FRACTION = 0.25
"""Share of jobs that hold GPUs without using them (a notebook left open, a hung rank, a data stall)."""
GPU_MEMORY_MIB = 81_559  # an H100 80GB as DCGM reports it
SIMULATED_NAMESPACE = "simulated"


def _job_rng(job_id: int, salt: str = "") -> random.Random:
    # Seeded by a stable hash: the same job looks the same in every process and every run.
    digest = hashlib.sha256(f"gangway-usage:{job_id}:{salt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def is_idle_job(job_id: int, idle_fraction: float = IDLE_FRACTION) -> bool:
    return _job_rng(job_id).random() < idle_fraction


def simulated_usage(
    allocations: Iterable[tuple[int, str, int]],
    *,
    at: float,
    idle_fraction: float = IDLE_FRACTION,
    period_s: float = 60.0,
) -> list[GpuUsageSample]:
    """One sample per allocated GPU, from (job id, node, gpus) allocations.

    A job is busy (85–98%) or idle (0–10%) for its whole life; the level wobbles a little from one
    `period_s` to the next so charts move, yet the same (allocations, at) always gives the same samples.
    """
    next_gpu: dict[str, int] = defaultdict(int)
    bucket = int(at // period_s)
    samples = []
    for job_id, node, gpus in allocations:
        job = _job_rng(job_id)
        is_idle = job.random() < idle_fraction
        low, high = (0.0, 10.0) if is_idle else (85.0, 98.0)
        level = job.uniform(low, high)
        memory_share = job.uniform(0.01, 0.03) if is_idle else job.uniform(0.70, 0.95)
        wobble = _job_rng(job_id, f"{node}:{bucket}")
        for _ in range(gpus):
            gpu = next_gpu[node]
            next_gpu[node] += 1
            util = min(high, max(low, level + wobble.uniform(-2.0, 2.0)))
            samples.append(GpuUsageSample(
                node=node,
                gpu=str(gpu),
                pod=f"job-{job_id}",
                namespace=SIMULATED_NAMESPACE,
                util_percent=round(util, 1),
                fb_used_mib=round(GPU_MEMORY_MIB * memory_share * wobble.uniform(0.97, 1.0)),
                at=at,
                job_id=job_id,
            ))
    return samples
