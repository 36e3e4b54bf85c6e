"""KubernetesCluster: the Cluster protocol over a real (or fake) Kubernetes API."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping

from scheduling.cluster.base import Cluster, DiscoveredWorkload, GangRelease, WorkloadRef, WorkloadSpec, WorkloadStatus
from scheduling.core.model import Node

from . import pods as pod_util
from .api import KubeApi
from .config import KubernetesSettings, load_api_client
from . import gangs, kinds
from .kinds import batch_job
from .names import MANAGED_LABEL
from .nodes import nodes_from_objects


class KubernetesCluster(Cluster):
    """Reads nodes, pods and workloads of every kind; releases, pins and suspends gangs; creates the Job of a job
    submitted with a pod template. Every call goes to the API."""

    creates_workloads = True

    def __init__(
        self,
        api_client=None,
        settings: KubernetesSettings | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        """Without arguments: settings from the environment, in-cluster config or the kubeconfig."""
        self.settings = settings or (KubernetesSettings() if api_client is not None else KubernetesSettings.from_env())
        if api_client is None:
            api_client = load_api_client(self.settings)
        self.api = KubeApi(api_client, self.settings, sleep=sleep)
        self.absent_kinds = gangs.AbsentKinds()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KubernetesCluster:
        settings = KubernetesSettings.from_env(environ)
        return cls(load_api_client(settings, environ), settings)

    @property
    def topology(self) -> tuple[str, ...]:
        """Label keys above the node, coarsest first: what the core's Snapshot.topology expects."""
        return self.settings.topology_labels

    # --- reading --------------------------------------------------------------------------------

    def list_nodes(self) -> list[Node]:
        node_objects, _ = self.api.list_nodes()
        pods, _ = self.api.list_pods()
        return self.nodes_from(node_objects, pods, self.list_managed())

    def list_managed(self) -> dict[str, list[dict]]:
        """The queue-labelled objects of every kind whose resource the cluster serves, by kind."""
        return {kind.KIND: gangs.list_labelled(self.api, kind, self.absent_kinds) for kind in kinds.ALL}

    def nodes_from(
        self, node_objects: Iterable[Mapping], pods: Iterable[Mapping], workloads: Mapping[str, Iterable[Mapping]]
    ) -> list[Node]:
        """The GPU nodes, each with the GPUs that pods Gangway does not manage hold on it."""
        managed_uids = frozenset(uid for objs in workloads.values() for obj in objs if (uid := (obj.get("metadata") or {}).get("uid")))
        external = pod_util.external_gpus_by_node(pods, managed_uids)
        return nodes_from_objects(list(node_objects), self.settings, external)

    def list_workloads(self) -> list[DiscoveredWorkload]:
        return self.workloads_from(self.list_managed())

    def workloads_from(self, workloads: Mapping[str, Iterable[Mapping]]) -> list[DiscoveredWorkload]:
        found = (kinds.kind_named(kind).discover(obj, self.settings) for kind, objs in workloads.items() for obj in objs)
        return sorted((w for w in found if w is not None), key=lambda w: (w.namespace, w.name, w.kind))

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        return gangs.statuses(self.api, list(workloads), self.absent_kinds)

    # --- acting ---------------------------------------------------------------------------------

    def release(self, release: GangRelease, now: float) -> None:
        """Unsuspend the workload with its placement, then pin (and, when all exist, ungate) its pods."""
        gangs.release(self.api, release)

    def pin_gang(self, namespace: str, name: str, kind: str = batch_job.KIND) -> bool:
        """Advance a released gang: pin new pods, ungate all once all exist. True once ungated."""
        return gangs.pin(self.api, kinds.kind_named(kind), namespace, name)

    def pin_gang_of(self, pod: Mapping) -> bool:
        """Advance the released gang `pod` belongs to (a new gated pod): False for a pod of no gang."""
        gang = gangs.gang_of_pod(pod)
        return gang is not None and gangs.pin(self.api, *gang)

    def pin_released_gangs(self) -> int:
        """Advance every released gang that still has gated pods; returns how many were ungated."""
        pods, _ = self.api.list_pods(label_selector=MANAGED_LABEL)
        waiting = set()
        for pod in pods:
            if pod_util.is_gated(pod) and (gang := gangs.gang_of_pod(pod)) is not None:
                kind, namespace, name = gang
                waiting.add((kind.KIND, namespace, name))
        return sum(1 for kind, namespace, name in sorted(waiting) if self.pin_gang(namespace, name, kind))

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        gangs.suspend(self.api, workload)

    def create_workload(self, *, namespace: str, name: str, spec: WorkloadSpec, pod_template: Mapping,
                        job_id: int | None = None) -> WorkloadRef:
        """Create a suspended, gated, Indexed Job for a job submitted through Gangway; idempotent per job id."""
        body = batch_job.build_job(namespace=namespace, name=name, spec=spec, pod_template=pod_template,
                                   flavor_label=self.settings.flavor_label, job_id=job_id)
        return batch_job.create(self.api, body, job_id=job_id)


__all__ = ["KubernetesCluster"]
