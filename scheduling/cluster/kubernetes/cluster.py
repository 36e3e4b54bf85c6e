"""KubernetesCluster: the Cluster protocol over a real (or fake) Kubernetes API."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping, Sequence

from scheduling.cluster.base import DiscoveredWorkload, GangRelease, WorkloadRef, WorkloadStatus
from scheduling.core.model import Node, PodSet

from . import pods as pod_util
from .api import KubeApi
from .config import KubernetesSettings, load_api_client
from .kinds import batch_job
from .names import MANAGED_LABEL
from .nodes import nodes_from_objects


class KubernetesCluster:
    """Reads nodes, pods and Jobs; releases, pins and suspends gangs. Every call goes to the API."""

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
        jobs = batch_job.list_managed(self.api)
        return self.nodes_from(node_objects, pods, jobs)

    def nodes_from(self, node_objects: Iterable[Mapping], pods: Iterable[Mapping], jobs: Iterable[Mapping]) -> list[Node]:
        """The GPU nodes, each with the GPUs that pods Gangway does not manage hold on it."""
        managed_uids = frozenset(uid for job in jobs if (uid := (job.get("metadata") or {}).get("uid")))
        external = pod_util.external_gpus_by_node(pods, managed_uids)
        return nodes_from_objects(list(node_objects), self.settings, external)

    def list_workloads(self) -> list[DiscoveredWorkload]:
        return self.workloads_from(batch_job.list_managed(self.api))

    def workloads_from(self, jobs: Iterable[Mapping]) -> list[DiscoveredWorkload]:
        found = (batch_job.discover(job, self.settings) for job in jobs)
        return sorted((w for w in found if w is not None), key=lambda w: (w.namespace, w.name))

    def workload_statuses(self, workloads: Iterable[WorkloadRef], now: float) -> dict[int, WorkloadStatus]:
        return batch_job.statuses(self.api, list(workloads))

    # --- acting ---------------------------------------------------------------------------------

    def release(self, release: GangRelease, now: float) -> None:
        """Unsuspend the Job with its placement, then pin (and, when all exist, ungate) its pods."""
        batch_job.release(self.api, release)

    def pin_gang(self, namespace: str, name: str) -> bool:
        """Advance a released gang: pin new pods, ungate all once all exist. True once ungated."""
        return batch_job.pin(self.api, namespace, name)

    def pin_released_gangs(self) -> int:
        """Advance every released gang that still has gated pods; returns how many were ungated."""
        pods, _ = self.api.list_pods(label_selector=MANAGED_LABEL)
        waiting = {
            ((pod.get("metadata") or {}).get("namespace", ""), owner["name"])
            for pod in pods
            if pod_util.is_gated(pod)
            for owner in (pod.get("metadata") or {}).get("ownerReferences") or ()
            if owner.get("kind") == "Job"
        }
        return sum(1 for namespace, name in sorted(waiting) if self.pin_gang(namespace, name))

    def suspend(self, workload: WorkloadRef, now: float) -> None:
        batch_job.suspend(self.api, workload)

    def create_workload(
        self,
        *,
        namespace: str,
        name: str,
        queue: str,
        pod_template: Mapping,
        pod_sets: Sequence[PodSet],
        flavor: str | None = None,
        priority: int = 0,
        topology_required: str | None = None,
        topology_preferred: str | None = None,
        runtime_limit_s: int | None = None,
        checkpoint_interval_s: int | None = None,
        is_preemptible: bool = True,
        job_id: int | None = None,
    ) -> WorkloadRef:
        """Create a suspended, gated, Indexed Job for a job submitted through Gangway; idempotent per job id."""
        body = batch_job.build_job(
            namespace=namespace, name=name, queue=queue, pod_template=pod_template, pod_sets=pod_sets,
            flavor=flavor, flavor_label=self.settings.flavor_label, priority=priority,
            topology_required=topology_required, topology_preferred=topology_preferred,
            runtime_limit_s=runtime_limit_s, checkpoint_interval_s=checkpoint_interval_s,
            is_preemptible=is_preemptible, job_id=job_id,
        )
        return batch_job.create(self.api, body, job_id=job_id)


__all__ = ["KubernetesCluster"]
