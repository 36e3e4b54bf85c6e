"""Small scenarios for simulator tests: a fleet of 8-GPU nodes in racks, a trace from tuples."""

from __future__ import annotations

from scheduling.core.model import Node
from scheduling.simulation.engine import Scenario
from scheduling.simulation.fleet import Fleet
from scheduling.simulation.trace import Trace, TraceJob

FLAVOR = "gpu"


def fleet(nodes: int = 2, *, gpus: int = 8, rack_size: int = 2) -> Fleet:
    return Fleet(
        ("rack",),
        tuple(Node(f"n{i + 1}", FLAVOR, gpus, gpus, {"rack": f"r{i // rack_size + 1}"}) for i in range(nodes)),
    )


def trace(*jobs: tuple) -> Trace:
    """Each job: (submit_s, team, gpus, duration_s[, priority])."""
    return Trace(
        "test",
        tuple(
            TraceJob(i, float(j[0]), float(j[3]), j[2], j[1], priority=j[4] if len(j) > 4 else 0)
            for i, j in enumerate(jobs, start=1)
        ),
    )


def scenario(jobs: Trace, quotas: dict[str, int], *, nodes: int = 2, rack_size: int = 2, checkpoint: int | None = None) -> Scenario:
    return Scenario(
        jobs, fleet(nodes, rack_size=rack_size), {team: {FLAVOR: gpus} for team, gpus in quotas.items()},
        checkpoint_interval_s=checkpoint,
    )
