"""A seeded synthetic trace: a busy week of a shared cluster, heavy-tailed and gang-heavy.

Arrivals are Poisson with a day/night swing (±50 %); durations are log-normal (median 20 min,
σ = 1.8: most jobs are short, a few run for days; capped at 7 days); sizes are mostly one node or
less, with 16-, 32- and 64-GPU gangs holding about a quarter of the GPU-hours (10–30 % for every
seed tried). Teams are drawn uniformly. The same seed gives the same trace on every machine.
"""

from __future__ import annotations

import math
import random

from scheduling.simulation.trace import Trace, TraceJob, _renumber

SIZES_GPUS = (1, 2, 4, 8, 16, 32, 64)
SIZE_WEIGHTS = (0.603, 0.10, 0.12, 0.14, 0.025, 0.010, 0.002)
MEDIAN_DURATION_S = 1200.0
DURATION_SIGMA = 1.8
MAX_DURATION_S = 7 * 24 * 3600.0
DAY_S = 24 * 3600.0


def synthetic_trace(*, jobs: int = 10_000, days: float = 7.0, teams: int = 8, seed: int = 1) -> Trace:
    rng = random.Random(seed)
    span_s = days * DAY_S
    mean_gap_s = span_s / jobs
    result, t = [], 0.0
    mu = math.log(MEDIAN_DURATION_S)
    while len(result) < jobs:
        # Thinning a Poisson process of twice the mean rate gives the day/night swing.
        t += rng.expovariate(2.0 / mean_gap_s)
        if rng.random() > (1 + 0.5 * math.sin(2 * math.pi * t / DAY_S)) / 2:
            continue
        duration_s = min(MAX_DURATION_S, max(1.0, rng.lognormvariate(mu, DURATION_SIGMA)))
        gpus = rng.choices(SIZES_GPUS, SIZE_WEIGHTS)[0]
        result.append(TraceJob(len(result) + 1, round(t), round(duration_s), gpus, f"team{rng.randrange(teams)}"))
    return Trace(f"synthetic seed {seed}", _renumber(result))


def multi_node_share(trace: Trace, node_gpus: int = 8) -> float:
    """The fraction of the trace's GPU-hours in jobs larger than one node."""
    total = trace.gpu_seconds
    multi = sum(job.gpus * job.duration_s for job in trace.jobs if job.gpus > node_gpus)
    return multi / total if total else 0.0
