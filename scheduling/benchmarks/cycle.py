"""`bench cycle`: one admission cycle at fleet scale, against a first-fit baseline."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from scheduling.benchmarks import synthetic
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import JobState, SchedulerConfig, Snapshot


def run(*, nodes: int, gpus_per_node: int, pending: int, queues: int, repeats: int, seed: int = 1) -> dict:
    fleet = synthetic.fleet(nodes, gpus_per_node)
    queue_map = synthetic.queues(queues, nodes * gpus_per_node)
    stream = synthetic.as_snapshot_lists_them(synthetic.jobs(pending, sorted(queue_map), seed=seed))
    results = {}
    for name, config in (("gangway", SchedulerConfig()), ("baseline", SchedulerConfig(topology_aware=False, preemption_enabled=False))):
        empty = Snapshot(now=0.0, topology=synthetic.TOPOLOGY, nodes=fleet, queues=queue_map, admitted=(), pending=tuple(stream), config=config)
        # Room: an empty fleet, the whole queue pending; the cycle fills the fleet.
        started = time.perf_counter()
        filled = run_admission_cycle(empty)
        room_s = time.perf_counter() - started
        # Steady state: the fleet as that cycle left it, the rest still pending.
        admitted_ids = {a.job_id: a for a in filled.admissions}
        by_id = {job.id: job for job in stream}
        holding = tuple(
            replace(by_id[i], state=JobState.RUNNING, placement=a.placement, admitted_at=0.0, started_at=0.0, are_pods_ready=True)
            for i, a in admitted_ids.items()
        )
        steady = replace(empty, now=60.0, admitted=holding, pending=tuple(j for j in stream if j.id not in admitted_ids))
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            run_admission_cycle(steady)
            times.append(time.perf_counter() - started)
        results[name] = {
            "p50_ms": statistics.median(times) * 1000,
            "p95_ms": _percentile(times, 0.95) * 1000,
            "admissions": len(filled.admissions),
            "admissions_per_s": len(filled.admissions) / room_s,
            "fill_cycle_ms": room_s * 1000,
            "allocated_gpus": sum(by_id[i].gpus for i in admitted_ids),
        }
    ours, base = results["gangway"], results["baseline"]
    return {
        "nodes": nodes,
        "gpus": nodes * gpus_per_node,
        "pending": pending,
        "queues": queues,
        "repeats": repeats,
        "p50_ms": round(ours["p50_ms"], 1),
        "p95_ms": round(ours["p95_ms"], 1),
        "admissions_per_s": round(ours["admissions_per_s"]),
        "admissions": ours["admissions"],
        "fill_cycle_ms": round(ours["fill_cycle_ms"], 1),
        "allocated_gpus": ours["allocated_gpus"],
        "baseline_p50_ms": round(base["p50_ms"], 1),
        "baseline_p95_ms": round(base["p95_ms"], 1),
        "baseline_admissions_per_s": round(base["admissions_per_s"]),
        "baseline_admissions": base["admissions"],
        "baseline_allocated_gpus": base["allocated_gpus"],
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
