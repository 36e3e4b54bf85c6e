"""Synthetic fleets, queues and job streams for benchmarks (seeded, so runs are comparable)."""

from __future__ import annotations

import random
from dataclasses import replace

from scheduling.core.model import Job, Node, PodSet, Queue, Quota, TopologyRequest

FLAVOR = "H100-80GB"
TOPOLOGY = ("block", "rack")

# (weight, pods, gpus per pod, required level): mostly small jobs, some multi-node gangs.
JOB_MIX = (
    (40, 1, 1, None),
    (15, 1, 2, None),
    (12, 1, 4, None),
    (13, 1, 8, None),
    (8, 2, 8, "rack"),
    (6, 4, 8, "rack"),
    (4, 8, 8, "block"),
    (2, 16, 8, "block"),
)


def fleet(nodes: int, gpus_per_node: int = 8, nodes_per_rack: int = 16, racks_per_block: int = 8) -> tuple[Node, ...]:
    result = []
    for i in range(nodes):
        rack = i // nodes_per_rack
        block = rack // racks_per_block
        result.append(
            Node(
                name=f"gpu-{i:05d}",
                flavor=FLAVOR,
                capacity_gpus=gpus_per_node,
                allocatable_gpus=gpus_per_node,
                labels={"block": f"b{block:02d}", "rack": f"b{block:02d}-r{rack:03d}"},
            )
        )
    return tuple(result)


def queues(count: int, total_gpus: int) -> dict[str, Queue]:
    nominal = total_gpus // count
    return {
        f"q{i:02d}": Queue(f"q{i:02d}", f"team{i:02d}", "shared", quotas={FLAVOR: Quota(nominal)})
        for i in range(count)
    }


def jobs(count: int, queue_names: list[str], *, seed: int, first_id: int = 1) -> list[Job]:
    rng = random.Random(seed)
    weights = [mix[0] for mix in JOB_MIX]
    result = []
    for k in range(count):
        _, pods, gpus, required = rng.choices(JOB_MIX, weights)[0]
        queue = rng.choice(queue_names)
        result.append(
            Job(
                id=first_id + k,
                queue=queue,
                team=queue.replace("q", "team"),
                flavor=FLAVOR,
                pod_sets=(PodSet("worker", pods, gpus),),
                priority=rng.choice((0, 0, 0, 10)),
                submitted_at=float(k),
                topology=TopologyRequest(required, None),
                runtime_limit_s=rng.choice((3600, 4 * 3600, 24 * 3600)),
                checkpoint_interval_s=rng.choice((None, 1800, 3600)),
            )
        )
    return result


def as_snapshot_lists_them(jobs: list[Job]) -> list[Job]:
    """The jobs as the live snapshot builds them: by queue, then priority and submit time (one index
    scan per queue), each job's objects built in that order, as they are from the database rows."""
    ordered = sorted(jobs, key=lambda j: (j.queue, *j.queue_order))
    return [
        replace(job, pod_sets=tuple(PodSet(*pod_set) for pod_set in job.pod_sets), topology=TopologyRequest(*job.topology))
        for job in ordered
    ]
