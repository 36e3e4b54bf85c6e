"""`bench explain` and `bench estimate`: explanations for the whole pending queue in one pass, and the forward estimate."""

from __future__ import annotations

import time
from dataclasses import replace

from scheduling.benchmarks import synthetic
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending
from scheduling.core.model import JobState, Snapshot
from scheduling.planning.forecast import DEFAULT_HORIZON_S, forecast


def steady_snapshot(*, nodes: int, gpus_per_node: int, pending: int, queues: int, seed: int) -> Snapshot:
    """A full fleet (the cycle filled it from empty) and the rest of the stream pending, ten minutes later."""
    fleet = synthetic.fleet(nodes, gpus_per_node)
    queue_map = synthetic.queues(queues, nodes * gpus_per_node)
    stream = synthetic.as_snapshot_lists_them(synthetic.jobs(pending, sorted(queue_map), seed=seed))
    empty = Snapshot(now=0.0, topology=synthetic.TOPOLOGY, nodes=fleet, queues=queue_map, admitted=(), pending=tuple(stream))
    filled = run_admission_cycle(empty)
    by_id = {job.id: job for job in stream}
    admitted = {a.job_id: a for a in filled.admissions}
    holding = tuple(
        replace(by_id[i], state=JobState.RUNNING, placement=a.placement, admitted_at=0.0, started_at=0.0, are_pods_ready=True)
        for i, a in admitted.items()
    )
    return replace(empty, now=600.0, admitted=holding, pending=tuple(j for j in stream if j.id not in admitted))


def run_explain(*, nodes: int, gpus_per_node: int, pending: int, queues: int, repeats: int, seed: int = 1) -> dict:
    snapshot = steady_snapshot(nodes=nodes, gpus_per_node=gpus_per_node, pending=pending, queues=queues, seed=seed)
    result = run_admission_cycle(snapshot)
    times, out = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        out = explain_pending(snapshot, result)
        times.append(time.perf_counter() - started)
    blocking: dict[str, int] = {}
    for explanation in out.by_job.values():
        blocking[explanation.blocking or "none"] = blocking.get(explanation.blocking or "none", 0) + 1
    return {
        "nodes": nodes,
        "pending": len(snapshot.pending),
        "explained": len(out.by_job),
        "distinct_shapes": out.shapes,
        "best_ms": round(min(times) * 1000, 1),
        "median_ms": round(sorted(times)[len(times) // 2] * 1000, 1),
        "target_ms": 1000,
        "blocking": dict(sorted(blocking.items())),
    }


def run_estimate(*, nodes: int, gpus_per_node: int, pending: int, queues: int, horizon_s: float = DEFAULT_HORIZON_S,
                 seed: int = 1) -> dict:
    snapshot = steady_snapshot(nodes=nodes, gpus_per_node=gpus_per_node, pending=pending, queues=queues, seed=seed)
    started = time.perf_counter()
    cpu = time.process_time()
    result = forecast(snapshot, horizon_s=horizon_s)
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    within = [s for s in result.starts.values() if s is not None]
    return {
        "nodes": nodes,
        "pending": len(snapshot.pending),
        "horizon_s": horizon_s,
        "estimated_within_horizon": len(within),
        "beyond_horizon": len(result.starts) - len(within),
        "cycles": result.cycles,
        "end_events": result.events,
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "target_s": 10,
    }
