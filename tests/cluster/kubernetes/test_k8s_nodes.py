"""Reading nodes: GPUs, flavor, topology labels, health, and GPUs held by pods Gangway does not manage."""

from __future__ import annotations

import pytest

from k8s_builders import TOPOLOGY, a_node, a_pod
from scheduling.core.model import Node, Taint
from scheduling.cluster.kubernetes import KubernetesSettings
from scheduling.cluster.kubernetes.config import DEFAULT_FLAVOR_LABEL


def test_a_healthy_gpu_node_reads_as_a_whole_core_node(fake, cluster):
    fake.create("nodes", a_node("gpu-001", block="b1", rack="r7"))

    assert cluster.list_nodes() == [
        Node(
            name="gpu-001",
            flavor="NVIDIA-H100-80GB-HBM3",
            capacity_gpus=8,
            allocatable_gpus=8,
            labels={TOPOLOGY[0]: "b1", TOPOLOGY[1]: "r7", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        )
    ]


@pytest.mark.parametrize(
    "node, expected",
    [
        pytest.param(a_node("n", allocatable=6), {"capacity_gpus": 8, "allocatable_gpus": 6, "is_unhealthy": True},
                     id="allocatable below capacity: unhealthy devices"),
        pytest.param(a_node("n", is_cordoned=True), {"is_cordoned": True, "is_ready": True}, id="cordoned"),
        pytest.param(a_node("n", is_ready=False), {"is_ready": False, "is_cordoned": False}, id="not ready"),
        pytest.param(
            a_node("n", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                {"key": "maintenance", "effect": "NoExecute"}]),
            {"taints": (Taint("nvidia.com/gpu", "present", "NoSchedule"), Taint("maintenance", "", "NoExecute"))},
            id="taints",
        ),
        pytest.param(a_node("n", product=None), {"flavor": "unknown", "capacity_gpus": 8}, id="no GFD label"),
        pytest.param(a_node("n", gpus=8, allocatable=0), {"allocatable_gpus": 0, "is_unhealthy": True},
                     id="device plugin reports nothing allocatable"),
    ],
)
def test_node_health_and_taints(fake, cluster, node, expected):
    fake.create("nodes", node)

    [parsed] = cluster.list_nodes()

    assert {field: getattr(parsed, field) for field in expected} == expected


def test_nodes_without_gpus_are_not_gpu_nodes(fake, cluster):
    fake.create("nodes", a_node("cpu-1", gpus=0, product=None))
    fake.create("nodes", a_node("gpu-1"))

    assert [node.name for node in cluster.list_nodes()] == ["gpu-1"]


def test_gpus_of_unmanaged_pods_count_as_external(fake, cluster):
    fake.create("nodes", a_node("gpu-1"))
    fake.create("nodes", a_node("gpu-2"))
    fake.create("pods", a_pod("notebook", node="gpu-1", gpus=2))
    fake.create("pods", a_pod("inference", node="gpu-1", gpus=1, namespace="serving"))
    fake.create("pods", a_pod("done", node="gpu-2", gpus=8, phase="Succeeded"))
    fake.create("pods", a_pod("unbound", node=None, gpus=8, phase="Pending"))
    fake.create("pods", a_pod("cpu-only", node="gpu-2", gpus=0))
    fake.create("pods", a_pod("ours", node="gpu-2", gpus=8, labels={"gangway.dev/managed": "true"}))

    assert {node.name: node.external_gpus for node in cluster.list_nodes()} == {"gpu-1": 3, "gpu-2": 0}


def test_settings_come_from_the_environment():
    settings = KubernetesSettings.from_env({
        "GANGWAY_TOPOLOGY_LABELS": "cloud.google.com/gce-topology-block, cloud.google.com/gce-topology-subblock",
        "GANGWAY_NAMESPACES": "research,prod",
        "KUBECONFIG": "/etc/gangway/kubeconfig",
    })

    assert settings.flavor_label == DEFAULT_FLAVOR_LABEL
    assert settings.topology_labels == ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock")
    assert settings.namespaces == ("research", "prod")
    assert settings.kubeconfig == "/etc/gangway/kubeconfig"
    assert KubernetesSettings.from_env({}).namespaces == ()


def test_a_custom_flavor_label_and_configured_namespaces(fake, api_client):
    from scheduling.cluster.kubernetes import KubernetesCluster

    node = a_node("gpu-1")
    node["metadata"]["labels"]["example.com/accelerator"] = "a100"
    fake.create("nodes", node)
    fake.create("pods", a_pod("watched", node="gpu-1", gpus=2, namespace="research"))
    fake.create("pods", a_pod("elsewhere", node="gpu-1", gpus=4, namespace="other"))
    settings = KubernetesSettings.from_env({"GANGWAY_FLAVOR_LABEL": "example.com/accelerator", "GANGWAY_NAMESPACES": "research"})

    [parsed] = KubernetesCluster(api_client, settings).list_nodes()

    assert (parsed.flavor, parsed.external_gpus) == ("a100", 2)
