"""What a replay measured: waits, completion times, allocation, fragmentation, preemptions, fairness.

Queueing delay (wait) is the *total* time a job spent pending: before its first start and after
every preemption, so a policy cannot hide waits by preempting. Job completion time (JCT) is end −
submit. Percentiles are nearest-rank. Jobs refused at submission (they could never run under the
policy) are counted as `rejected` and left out of the waits.
"""

from __future__ import annotations

import math
from typing import Iterable

from scheduling.simulation.engine import JobRecord, SimResult

SIZE_BUCKETS = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), (">64", 65, math.inf))
REFERENCE = "fifo-isolated"


def percentile(values: list[float], p: float) -> float:
    """Nearest rank on an already sorted list."""
    if not values:
        return 0.0
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def wait_stats(records: Iterable[JobRecord]) -> dict:
    records = list(records)
    waits = sorted(r.waited_s for r in records)
    jcts = [r.end_s - r.submit_s for r in records]
    n = len(waits)
    return {
        "jobs": n,
        "mean_wait_s": sum(waits) / n if n else 0.0,
        "p50_wait_s": percentile(waits, 50),
        "p95_wait_s": percentile(waits, 95),
        "p99_wait_s": percentile(waits, 99),
        "max_wait_s": waits[-1] if waits else 0.0,
        "mean_jct_s": sum(jcts) / n if n else 0.0,
    }


def summarize(result: SimResult) -> dict:
    """The JSON-ready metrics of one policy run."""
    done = [r for r in result.records.values() if r.end_s is not None]
    rejected = sum(1 for r in result.records.values() if r.rejected)
    unfinished = len(result.records) - len(done) - rejected
    summary = wait_stats(done)
    summary["rejected"] = rejected
    summary["unfinished"] = unfinished
    summary["per_team"] = {
        team: wait_stats(r for r in done if r.team == team) for team in sorted({r.team for r in done})
    }
    summary["per_size"] = {
        name: wait_stats(r for r in done if low <= r.gpus <= high)
        for name, low, high in SIZE_BUCKETS
        if any(low <= r.gpus <= high for r in done)
    }
    summary["over_8_gpus"] = wait_stats(r for r in done if r.gpus > 8)
    in_window = [s for s in result.samples if s.t <= result.horizon_s] or result.samples
    makespan = max((r.end_s for r in done), default=0.0)
    summary.update(
        {
            "preemptions": result.preemptions,
            "preempted_jobs": sum(1 for r in done if r.preemptions),
            "gpu_hours_lost": sum(r.lost_gpu_s for r in result.records.values()) / 3600.0,
            "gpu_hours_served": sum(r.served_gpu_s for r in result.records.values()) / 3600.0,
            "total_gpus": result.total_gpus,
            "total_nodes": result.total_nodes,
            "mean_allocation": (
                sum(s.allocated_gpus for s in in_window) / len(in_window) / result.total_gpus if in_window else 0.0
            ),
            "mean_whole_free_nodes": sum(s.whole_free_nodes for s in in_window) / len(in_window) if in_window else 0.0,
            "makespan_s": makespan,
            "events": result.events,
            "cycles": result.cycles,
            "wall_s": result.wall_s,
            "cpu_s": result.cpu_s,
            "events_per_s": result.events / result.wall_s if result.wall_s else 0.0,
            "wait_quantiles_s": _quantiles(sorted(r.waited_s for r in done)),
            "timeline": {
                "t_h": [s.t / 3600.0 for s in result.samples],
                "allocated_gpus": [s.allocated_gpus for s in result.samples],
                "whole_free_nodes": [s.whole_free_nodes for s in result.samples],
                "pending_jobs": [s.pending_jobs for s in result.samples],
            },
        }
    )
    return summary


def _quantiles(waits: list[float]) -> list[float]:
    """The wait at every 0.5 % of jobs (201 points): enough to draw the CDF."""
    return [percentile(waits, k / 2) if k else (waits[0] if waits else 0.0) for k in range(201)]


def add_fairness(policies: dict[str, dict]) -> None:
    """Each team's mean wait relative to its wait under `fifo-isolated` (≤ 1: not worse off for sharing)."""
    reference = policies.get(REFERENCE)
    if reference is None:
        return
    for summary in policies.values():
        ratios, excess = {}, {}
        for team, stats in summary["per_team"].items():
            base = reference["per_team"].get(team)
            if base is None:
                continue
            ratios[team] = stats["mean_wait_s"] / base["mean_wait_s"] if base["mean_wait_s"] > 0 else (
                1.0 if stats["mean_wait_s"] == 0 else math.inf
            )
            excess[team] = stats["mean_wait_s"] - base["mean_wait_s"]
        summary["wait_vs_fifo_isolated"] = ratios
        summary["wait_excess_vs_fifo_isolated_s"] = excess
        summary["teams_worse_than_fifo_isolated"] = sorted(t for t, e in excess.items() if e > 0)
