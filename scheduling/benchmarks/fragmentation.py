"""`bench fragmentation`: whole free nodes and the largest placeable gang over a stream of mixed jobs.

The same seeded stream (arrivals, each with a lifetime counted in arrivals) is placed on a
1,024-GPU fleet (128 nodes x 8, 2 blocks x 4 racks x 16) by three placers: Gangway's core,
first fit by node name, and random fit. A job that does not fit is turned away and counted: with
the same constraints for all three, the GPUs turned away measure what fragmentation costs.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

from scheduling.benchmarks import synthetic
from scheduling.core.fragmentation import measure
from scheduling.core.model import FLEET, Job, TopologyRequest
from scheduling.core.placement import FleetState, GangPlacement, PlacedPod


class RandomFitFleet(FleetState):
    """Each pod on a node drawn at random among those that hold it: the floor of placement quality."""

    def __init__(self, *args, seed: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rng = random.Random(seed)

    def place(self, job: Job, **_) -> GangPlacement | None:
        classes = self.tolerated_classes(job)
        trial = list(self.free)
        placed, sizes = [], []
        for pod_set in job.pod_sets:
            for index in range(pod_set.count):
                fitting = [i for i in range(len(self.nodes)) if trial[i] >= pod_set.gpus_per_pod and self.is_eligible(i, classes)]
                if not fitting:
                    return None
                i = self.rng.choice(fitting)
                trial[i] -= pod_set.gpus_per_pod
                placed.append(PlacedPod(pod_set.name, index, i))
                sizes.append(pod_set.gpus_per_pod)
        return GangPlacement(self.domains[FLEET][0], tuple(placed), tuple(sizes))


def _replay(fleet: FleetState, stream) -> dict:
    running, whole, gang_rack, gang_fleet, turned_away = [], [], [], [], 0
    for step, (job, lifetime) in enumerate(stream):
        for entry in [r for r in running if r[0] <= step]:
            fleet.release_placement(entry[1], entry[2])
            running.remove(entry)
        placement = fleet.place(job)
        if placement is None:
            turned_away += job.gpus
        else:
            running.append((step + lifetime, fleet.commit(placement), job))
        report = measure(fleet, synthetic.FLAVOR)
        whole.append(report.whole_free_nodes)
        gang_rack.append(report.largest_gang_pods(8, level="rack"))
        gang_fleet.append(report.largest_gang_pods(8, level=FLEET))
    return {
        "mean_whole_free_nodes": round(statistics.mean(whole), 2),
        "mean_largest_8gpu_gang_in_a_rack": round(statistics.mean(gang_rack), 2),
        "mean_largest_8gpu_gang_in_fleet": round(statistics.mean(gang_fleet), 2),
        "turned_away_gpus": turned_away,
    }


def run(*, jobs: int = 3000, seed: int = 1) -> dict:
    rng = random.Random(seed)
    nodes = synthetic.fleet(128, 8, nodes_per_rack=16, racks_per_block=4)
    # No topology requests: first fit and random fit cannot honour them, and a placer that ignores a
    # constraint would look better for accepting jobs it should refuse. Gangway still keeps each gang
    # in the smallest domain that holds it.
    stream_jobs = [replace(job, topology=TopologyRequest()) for job in synthetic.jobs(jobs, ["q"], seed=seed)]
    # A lifetime of ~100 arrivals keeps the fleet around three-quarters allocated.
    stream = [(job, rng.randint(20, 180)) for job in stream_jobs]
    topology = synthetic.TOPOLOGY
    return {
        "jobs": jobs,
        "gangway": _replay(FleetState(nodes, topology), stream),
        "first_fit": _replay(FleetState(nodes, topology, topology_aware=False), stream),
        "random": _replay(RandomFitFleet(nodes, topology, seed=seed), stream),
    }
