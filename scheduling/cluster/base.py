"""The Cluster protocol every adapter implements, and the plain records it exchanges."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol

from scheduling.core.model import Node, PodPlacement


class WorkloadPhase(enum.StrEnum):
    SUSPENDED = "suspended"
    STARTING = "starting"
    """Released; not every pod is running yet."""
    RUNNING = "running"
    """Every pod of the gang is running."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    MISSING = "missing"
    """The cluster knows nothing of it (deleted, or never created)."""


class ClusterError(Exception):
    """The cluster refused or could not answer a request; the message says which and why."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """What an adapter needs to find a Gangway job's workload in the cluster."""

    job_id: int
    generation: int
    namespace: str = ""
    name: str = ""
    kind: str = "Job"
    """The workload's kind in the cluster: Job, JobSet, PyTorchJob."""


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    job_id: int
    phase: WorkloadPhase
    generation: int = 0
    """The admission generation the cluster is running, 0 when suspended or unknown."""
    ready_pods: int = 0


@dataclass(frozen=True, slots=True)
class GangRelease:
    """Start a gang on exactly these nodes. Applying the same (job_id, generation) twice is a no-op."""

    workload: WorkloadRef
    placement: tuple[PodPlacement, ...]


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """The gang a workload runs, as Gangway accounts for it: what a submission stores, a created Job's annotations
    carry and discovery reads back. The one description on every path between the database and the cluster."""

    queue: str
    flavor: str | None
    pod_sets: tuple  # tuple[core.model.PodSet, ...]
    priority: int = 0
    priority_class: str | None = None
    """The priority class the workload names (gangway.dev/priority-class or Kueue's label); resolved by the service."""
    topology_required: str | None = None
    topology_preferred: str | None = None
    runtime_limit_s: int | None = None
    checkpoint_interval_s: int | None = None
    is_preemptible: bool = True

    @property
    def gpus(self) -> int:
        return sum(p.count * p.gpus_per_pod for p in self.pod_sets)


@dataclass(frozen=True, slots=True)
class DiscoveredWorkload:
    """A suspended workload found in the cluster that Gangway should manage as a job."""

    namespace: str
    name: str
    spec: WorkloadSpec
    annotations: dict = field(default_factory=dict)
    tolerations: tuple = ()
    """The pod template's tolerations as {key, operator, value, effect} dicts: GPU nodes are often tainted."""
    created_at: float | None = None
    """When the workload was created (epoch seconds): its place in the queue, not when Gangway saw it."""
    kind: str = "Job"


class NodeSource(Protocol):
    """Where a snapshot reads the nodes: a cluster, or the Node rows alone (registry.RecordedNodes)."""

    lists_node_rows: bool = False
    """Its nodes are the Node rows: the reconcile pass may keep them until one changes (snapshot_cache)."""

    def list_nodes(self) -> list[Node]:
        """Every GPU node as the cluster sees it now."""


class Cluster(NodeSource, Protocol):
    """What the reconcile pass asks of a cluster. Adapters subclass it, so the optional capabilities below keep
    their stated defaults: callers ask `creates_workloads`, never hasattr."""

    creates_workloads: bool = False
    """It creates the workload of a job submitted with a pod template (create_workload); otherwise every job's
    workload is one the cluster already had (discovered) or none at all (simulated)."""

    def list_workloads(self) -> list[DiscoveredWorkload]:
        """Managed workloads waiting to be admitted (empty for the simulated cluster)."""

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        """Phase and readiness of each released workload, by job id."""

    def release(self, release: GangRelease, now: float) -> None:
        """Start the gang on its placement; idempotent per (job id, generation)."""

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        """Stop every pod of the gang and hold it suspended; idempotent."""

    def create_workload(self, *, namespace: str, name: str, spec: WorkloadSpec, pod_template: Mapping,
                        job_id: int | None = None) -> WorkloadRef:
        """Create the suspended, gated workload of a job submitted with `pod_template`; idempotent per job id.
        Only where `creates_workloads`."""
        raise ClusterError(f"{type(self).__name__} does not create workloads")

    def pin_released_gangs(self) -> int:
        """Advance every released gang whose pods still wait to be pinned (events the watcher missed); how many were
        ungated. Nothing to do where a release starts every pod at once."""
        return 0
