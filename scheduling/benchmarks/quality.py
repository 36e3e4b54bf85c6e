"""`bench quality`: admitted GPU demand of one cycle against the exact optimum (OR-Tools CP-SAT).

Small random instances (16-32 nodes in racks, 20-40 gangs, some requiring one rack) on an empty
fleet: the core admits in its order; CP-SAT chooses the set of gangs (and their nodes, honouring
all-or-nothing, node capacity and the required rack) that maximises admitted GPUs. The ratio is
core ÷ optimum. OR-Tools is an optional dependency (`pip install -e .[bench]`).
"""

from __future__ import annotations

import random
import statistics

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import Job, Node, PodSet, Queue, Quota, Snapshot, TopologyRequest

FLAVOR = "H100"


def instance(rng: random.Random) -> tuple[tuple[Node, ...], list[Job]]:
    node_count = rng.randint(16, 32)
    nodes = tuple(
        Node(f"n{i:02d}", FLAVOR, 8, 8, {"rack": f"r{i // 8}"}, external_gpus=rng.choice((0, 0, 0, 2, 4)))
        for i in range(node_count)
    )
    jobs = []
    for k in range(rng.randint(20, 40)):
        pods, gpus = rng.choice(((1, 1), (1, 2), (1, 4), (1, 8), (2, 4), (2, 8), (4, 8), (3, 2)))
        required = "rack" if pods > 1 and rng.random() < 0.5 else None
        jobs.append(
            Job(k + 1, "q", "t", FLAVOR, (PodSet("w", pods, gpus),), submitted_at=float(k), topology=TopologyRequest(required, None))
        )
    return nodes, jobs


def core_admitted_gpus(nodes, jobs) -> int:
    queues = {"q": Queue("q", "t", None, quotas={FLAVOR: Quota(10**6)})}
    result = run_admission_cycle(Snapshot(now=0.0, topology=("rack",), nodes=nodes, queues=queues, admitted=(), pending=tuple(jobs)))
    by_id = {job.id: job for job in jobs}
    return sum(by_id[a.job_id].gpus for a in result.admissions)


def optimum_gpus(nodes, jobs, time_limit_s: float = 10.0) -> tuple[int, bool]:
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    racks = sorted({n.labels["rack"] for n in nodes})
    admitted, load = {}, {n.name: [] for n in nodes}
    for job in jobs:
        (pod_set,) = job.pod_sets
        x = admitted[job.id] = model.NewBoolVar(f"x{job.id}")
        pods_on = {n.name: model.NewIntVar(0, pod_set.count, f"p{job.id}_{n.name}") for n in nodes}
        model.Add(sum(pods_on.values()) == pod_set.count * x)
        for n in nodes:
            load[n.name].append(pods_on[n.name] * pod_set.gpus_per_pod)
        if job.topology.required == "rack":
            in_rack = {r: model.NewBoolVar(f"z{job.id}_{r}") for r in racks}
            model.Add(sum(in_rack.values()) == x)
            for n in nodes:
                model.Add(pods_on[n.name] <= pod_set.count * in_rack[n.labels["rack"]])
    for n in nodes:
        model.Add(sum(load[n.name]) <= n.allocatable_gpus - n.external_gpus)
    model.Maximize(sum(job.gpus * admitted[job.id] for job in jobs))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 2
    status = solver.Solve(model)
    return int(solver.ObjectiveValue()), status == cp_model.OPTIMAL


def run(*, instances: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    ratios, proven = [], 0
    for _ in range(instances):
        nodes, jobs = instance(rng)
        best, is_optimal = optimum_gpus(nodes, jobs)
        proven += is_optimal
        ratios.append(core_admitted_gpus(nodes, jobs) / best if best else 1.0)
    return {
        "instances": instances,
        "mean_ratio": round(statistics.mean(ratios), 4),
        "worst_ratio": round(min(ratios), 4),
        "proven_optimal": proven,
    }
