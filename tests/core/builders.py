"""Fluent builders for small literal fleets, queues and gangs in core tests."""

from __future__ import annotations

from dataclasses import replace

from scheduling.core.model import (
    Job,
    JobState,
    Node,
    PodPlacement,
    PodSet,
    PreemptionPolicy,
    Queue,
    QueueingStrategy,
    Quota,
    SchedulerConfig,
    Snapshot,
    Taint,
    TopologyRequest,
)

FLAVOR = "H100"


def rack_fleet(blocks: int = 1, racks: int = 2, nodes: int = 4, gpus: int = 8, flavor: str = FLAVOR) -> list[Node]:
    """Nodes named b{block}r{rack}n{node}, labelled block/rack."""
    return [
        Node(f"b{b}r{r}n{n}", flavor, gpus, gpus, {"block": f"b{b}", "rack": f"b{b}r{r}"})
        for b in range(blocks)
        for r in range(racks)
        for n in range(nodes)
    ]


def node(name: str, gpus: int = 8, **overrides) -> Node:
    fields = {"flavor": FLAVOR, "capacity_gpus": gpus, "allocatable_gpus": gpus, "labels": {"block": "b0", "rack": "b0r0"}}
    fields.update(overrides)
    return Node(name, **fields)


def queue(name: str, nominal: int, *, team: str | None = None, cohort: str | None = "shared", **options) -> Queue:
    borrowing = options.pop("borrowing_limit", None)
    lending = options.pop("lending_limit", None)
    return Queue(
        name,
        team or name,
        cohort,
        quotas={FLAVOR: Quota(nominal, borrowing, lending)},
        **options,
    )


class GangBuilder:
    _next_id = 1

    def __init__(self, pods: int, gpus: int) -> None:
        GangBuilder._next_id += 1
        self.job = Job(
            id=GangBuilder._next_id,
            queue="q",
            team="q",
            flavor=FLAVOR,
            pod_sets=(PodSet("worker", pods, gpus),),
            submitted_at=float(GangBuilder._next_id),
        )

    def id(self, job_id: int) -> GangBuilder:
        return self._with(id=job_id)

    def in_queue(self, name: str, team: str | None = None) -> GangBuilder:
        return self._with(queue=name, team=team or name)

    def checkpointing(self, interval_s: int | None) -> GangBuilder:
        return self._with(checkpoint_interval_s=interval_s)

    def priority(self, value: int) -> GangBuilder:
        return self._with(priority=value)

    def at_class(self, priority_class: str) -> GangBuilder:
        return self._with(priority_class=priority_class)

    def submitted(self, at: float) -> GangBuilder:
        return self._with(submitted_at=at)

    def ran_before(self, attained_gpu_s: float) -> GangBuilder:
        return self._with(attained_gpu_s=attained_gpu_s)

    def requires(self, level: str | None = None, preferred: str | None = None) -> GangBuilder:
        return self._with(topology=TopologyRequest(level, preferred))

    def not_preemptible(self) -> GangBuilder:
        return self._with(is_preemptible=False)

    def checkpoints_every(self, seconds: int) -> GangBuilder:
        return self._with(checkpoint_interval_s=seconds)

    def tolerates(self, *tolerations) -> GangBuilder:
        return self._with(tolerations=tuple(tolerations))

    def running_on(self, *nodes: str, since: float = 0.0, ready: bool = True) -> GangBuilder:
        pod_set = self.job.pod_sets[0]
        placement = tuple(PodPlacement(pod_set.name, i, n) for i, n in enumerate(nodes))
        assert len(placement) == pod_set.count, "one node per pod"
        return self._with(
            state=JobState.RUNNING, placement=placement, admitted_at=since, started_at=since, are_pods_ready=ready
        )

    def idle_since(self, at: float) -> GangBuilder:
        """Its GPUs have been used below the idle threshold since `at` (core.idle)."""
        return self._with(idle_since=at)

    def _with(self, **changes) -> GangBuilder:
        self.job = replace(self.job, **changes)
        return self

    def build(self) -> Job:
        return self.job


def a_gang(pods: int = 1, gpus: int = 8) -> GangBuilder:
    return GangBuilder(pods, gpus)


def snapshot(
    nodes,
    queues,
    *,
    pending=(),
    admitted=(),
    now: float = 10_000.0,
    topology=("block", "rack"),
    config: SchedulerConfig | None = None,
    **extra,
) -> Snapshot:
    return Snapshot(
        now=now,
        topology=tuple(topology),
        nodes=tuple(nodes),
        queues={q.name: q for q in queues},
        admitted=tuple(j.build() if isinstance(j, GangBuilder) else j for j in admitted),
        pending=tuple(j.build() if isinstance(j, GangBuilder) else j for j in pending),
        config=config or EVERY_PLAN_RUNS,
        **extra,
    )


EVERY_PLAN_RUNS = SchedulerConfig(preempt_only_when_it_pays=False)
"""The default of these tests: they are about which victims a plan takes and who approves it, with
victims that ran for hours without checkpoints, which the value rule (core.payoff, tested on its own
in test_payoff.py) would rightly refuse to preempt for a gang of their size."""


__all__ = [
    "FLAVOR",
    "PreemptionPolicy",
    "QueueingStrategy",
    "Taint",
    "a_gang",
    "node",
    "queue",
    "rack_fleet",
    "snapshot",
]
