"""The Cluster protocol every adapter implements, and the plain records it exchanges."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Protocol

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
class DiscoveredWorkload:
    """A suspended workload found in the cluster that Gangway should manage as a job."""

    namespace: str
    name: str
    queue: str
    flavor: str
    pod_sets: tuple  # tuple[core.model.PodSet, ...]
    priority: int = 0
    topology_required: str | None = None
    topology_preferred: str | None = None
    runtime_limit_s: int | None = None
    checkpoint_interval_s: int | None = None
    is_preemptible: bool = True
    annotations: dict = field(default_factory=dict)
    tolerations: tuple = ()
    """The pod template's tolerations as {key, operator, value, effect} dicts: GPU nodes are often tainted."""
    created_at: float | None = None
    """When the workload was created (epoch seconds): its place in the queue, not when Gangway saw it."""
    kind: str = "Job"
    priority_class: str | None = None
    """The priority class the workload names (gangway.dev/priority-class or Kueue's label); resolved by the service."""


class Cluster(Protocol):
    def list_nodes(self) -> list[Node]:
        """Every GPU node as the cluster sees it now."""

    def list_workloads(self) -> list[DiscoveredWorkload]:
        """Managed workloads waiting to be admitted (empty for the simulated cluster)."""

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        """Phase and readiness of each released workload, by job id."""

    def release(self, release: GangRelease, now: float) -> None:
        """Start the gang on its placement; idempotent per (job id, generation)."""

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        """Stop every pod of the gang and hold it suspended; idempotent."""
