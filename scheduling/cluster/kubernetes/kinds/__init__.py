"""Workload kinds Gangway manages. Each kind is one module with the same small interface (WorkloadKind);
the release, pinning, eviction and status machinery in `..gangs` works on any of them."""

from __future__ import annotations

from typing import Mapping, Protocol

from scheduling.cluster.base import DiscoveredWorkload, WorkloadPhase

from ..config import KubernetesSettings
from . import batch_job, jobset, pytorchjob


class WorkloadKind(Protocol):
    KIND: str
    """The object's `kind`, also what Gangway records as the job's workload kind."""
    GROUP: str
    VERSION: str
    RESOURCE: str
    """The plural resource name the API serves (and the ClusterRole grants)."""

    def discover(self, obj: Mapping, settings: KubernetesSettings) -> DiscoveredWorkload | None:
        """The gang a labelled, suspended workload describes; None when it is not Gangway's to manage."""

    def pod_sets(self, obj: Mapping) -> dict[str, int]:
        """Pods per pod set once the workload runs: every one must exist and be pinned before any is ungated."""

    def is_suspended(self, obj: Mapping) -> bool: ...

    def release_patch(self, obj: Mapping, generation: int) -> dict:
        """The merge patch that unsuspends the workload with its pod templates stamped for `generation`."""

    def evict_patch(self, obj: Mapping) -> dict | None:
        """The merge patch that suspends it (its controller then deletes the pods); None if suspended."""

    def owner_of(self, pod: Mapping) -> str | None:
        """The name of the workload of this kind whose controller created `pod`, if any."""

    def gang_key(self, pod: Mapping, obj: Mapping) -> tuple[str, int] | None:
        """(pod set, index) of one of `obj`'s pods; None for a pod that is not one of its gang."""

    def finished_phase(self, obj: Mapping) -> WorkloadPhase | None:
        """SUCCEEDED or FAILED once the workload's controller says so."""

    def placement_of(self, obj: Mapping) -> dict[tuple[str, int], str]:
        """(pod set, index) → node, as written at release."""


ALL: tuple[WorkloadKind, ...] = (batch_job, jobset, pytorchjob)  # type: ignore[assignment]
BY_KIND: dict[str, WorkloadKind] = {kind.KIND: kind for kind in ALL}


def kind_named(name: str) -> WorkloadKind:
    try:
        return BY_KIND[name or batch_job.KIND]
    except KeyError:
        raise ValueError(f"unknown workload kind {name!r}; Gangway manages {sorted(BY_KIND)}") from None
