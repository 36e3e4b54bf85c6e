"""Builders of Kubernetes objects as the API serves them: nodes, pods, training Jobs."""

from __future__ import annotations

import copy

TOPOLOGY = ("example.com/block", "example.com/rack")


def a_node(
    name: str,
    *,
    gpus: int = 8,
    allocatable: int | None = None,
    product: str | None = "NVIDIA-H100-80GB-HBM3",
    block: str = "b1",
    rack: str = "r1",
    is_ready: bool = True,
    is_cordoned: bool = False,
    taints: list[dict] | None = None,
) -> dict:
    labels = {"kubernetes.io/hostname": name, TOPOLOGY[0]: block, TOPOLOGY[1]: rack, "unrelated/label": "x"}
    if product:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus)
    capacity = {"cpu": "96", "memory": "1Ti"}
    allocatable_res = {"cpu": "95", "memory": "1000Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
        allocatable_res["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": is_cordoned, "taints": taints or []},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable_res,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if is_ready else "False"},
            ],
        },
    }


def a_container(gpus: int = 0, *, name: str = "main", requests_only: bool = False) -> dict:
    resources: dict = {"limits": {"cpu": "4"}, "requests": {"cpu": "4"}}
    if gpus:
        if not requests_only:
            resources["limits"]["nvidia.com/gpu"] = str(gpus)
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": "nvcr.io/nvidia/pytorch:24.05-py3", "resources": resources}


def a_pod(name: str, *, node: str | None, gpus: int, namespace: str = "default", phase: str = "Running", labels=None) -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {"nodeName": node, "containers": [a_container(gpus)]},
        "status": {"phase": phase},
    }


def a_training_job(
    name: str = "llama-70b",
    *,
    namespace: str = "research",
    pods: int = 4,
    gpus: int = 8,
    queue: str | None = "vision",
    suspend: bool = True,
    indexed: bool = True,
    annotations: dict | None = None,
    node_selector: dict | None = None,
    gated: bool = True,
) -> dict:
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [a_container(gpus), a_container(0, name="sidecar")],
    }
    if gated:
        spec["schedulingGates"] = [{"name": "gangway.dev/admission"}]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    labels = {"team": "vision"}
    if queue:
        labels["gangway.dev/queue"] = queue
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": copy.deepcopy(annotations or {})},
        "spec": {
            "suspend": suspend,
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def a_pod_template(gpus: int, *, name: str = "main", gated: bool = True, tolerations: list[dict] | None = None) -> dict:
    spec: dict = {"restartPolicy": "Never", "containers": [a_container(gpus, name=name)]}
    if gated:
        spec["schedulingGates"] = [{"name": "gangway.dev/admission"}]
    if tolerations is not None:
        spec["tolerations"] = copy.deepcopy(tolerations)
    return {"metadata": {"labels": {"role": name}}, "spec": spec}


def a_jobset(
    name: str = "llama-jobset",
    *,
    namespace: str = "research",
    roles: tuple[tuple[str, int, int, int], ...] = (("launcher", 1, 1, 0), ("workers", 2, 4, 8)),
    queue: str | None = "vision",
    queue_label: str = "gangway.dev/queue",
    suspend: bool = True,
    annotations: dict | None = None,
    tolerations: list[dict] | None = None,
) -> dict:
    """roles: (replicated job, replicas, pods per child Job, GPUs per pod)."""
    labels = {queue_label: queue} if queue else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": copy.deepcopy(annotations or {})},
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {"name": role, "replicas": replicas, "template": {"spec": {
                    "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                    "template": a_pod_template(gpus, name=role, tolerations=tolerations),
                }}}
                for role, replicas, pods, gpus in roles
            ],
        },
    }


def a_pytorchjob(
    name: str = "bert-ddp",
    *,
    namespace: str = "research",
    masters: int = 1,
    workers: int = 3,
    gpus: int = 8,
    queue: str | None = "vision",
    suspend: bool = True,
    annotations: dict | None = None,
    tolerations: list[dict] | None = None,
) -> dict:
    labels = {"gangway.dev/queue": queue} if queue else {}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": copy.deepcopy(annotations or {})},
        "spec": {
            "runPolicy": {"suspend": suspend},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": masters, "restartPolicy": "OnFailure",
                           "template": a_pod_template(gpus, name="pytorch", tolerations=tolerations)},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                           "template": a_pod_template(gpus, name="pytorch", tolerations=tolerations)},
            },
        },
    }
