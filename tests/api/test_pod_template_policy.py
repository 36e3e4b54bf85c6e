"""A pod template submitted through Gangway sets only what a training job needs; anything that escalates is a 400
naming the field, and nothing is written. Discovered workloads are their owners' business and are not checked."""

from __future__ import annotations

import copy

import pytest

from scheduling.models import Job
from scheduling.pod_templates import pod_template_violations
from tests.conftest import job_body

pytestmark = pytest.mark.django_db

TRAINING = {
    "metadata": {"labels": {"app": "llama"}, "annotations": {"example.com/owner": "vision"}},
    "spec": {
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "train",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["torchrun"],
            "args": ["--nproc-per-node=8", "train.py"],
            "workingDir": "/workspace",
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "512Gi"}, "requests": {"cpu": "32"}},
            "ports": [{"containerPort": 29500, "name": "rendezvous"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}, {"name": "shm", "mountPath": "/dev/shm"}],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}, {"name": "shm", "emptyDir": {"medium": "Memory"}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


def with_change(path: str, value):
    template = copy.deepcopy(TRAINING)
    *parents, last = path.split(".")
    node = template
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return template


def test_a_training_job_template_is_accepted_and_stored_as_given(client_as):
    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(pod_template=TRAINING, pod_sets=[
        {"name": "worker", "count": 2, "gpus_per_pod": 8}]), format="json")

    assert response.status_code == 201, response.json()
    assert Job.objects.get().pod_template == TRAINING


ESCALATIONS = [
    ("spec.containers.0.securityContext.privileged", True),
    ("spec.containers.0.securityContext.capabilities.add", ["SYS_ADMIN"]),
    ("spec.containers.0.securityContext.allowPrivilegeEscalation", True),
    ("spec.containers.0.securityContext.runAsUser", 0),
    ("spec.containers.0.ports.0.hostPort", 29500),
    ("spec.containers.0.volumeMounts.0.mountPropagation", "Bidirectional"),
    ("spec.containers.0.env.0.valueFrom", {"secretKeyRef": {"name": "gangway-db", "key": "password"}}),
    ("spec.containers.0.envFrom", [{"secretRef": {"name": "gangway-db"}}]),
    ("spec.containers.0.lifecycle", {"postStart": {"exec": {"command": ["sh"]}}}),
    ("spec.hostNetwork", True),
    ("spec.hostPID", True),
    ("spec.hostIPC", True),
    ("spec.volumes.0.hostPath", {"path": "/"}),
    ("spec.serviceAccountName", "gangway"),
    ("spec.automountServiceAccountToken", True),
    ("spec.nodeName", "gpu-r1-n1"),
    ("spec.nodeSelector", {"kubernetes.io/hostname": "gpu-r1-n1"}),
    ("spec.priorityClassName", "system-node-critical"),
    ("spec.schedulingGates", []),
    ("spec.initContainers", [{"name": "root", "image": "busybox", "securityContext": {"privileged": True}}]),
    ("spec.securityContext.sysctls", [{"name": "kernel.shm_rmid_forced", "value": "0"}]),
    ("metadata.labels.gangway.dev/queue", "language-main"),
    ("metadata.annotations.gangway.dev/admission-generation", "7"),
    ("metadata.namespace", "kube-system"),
]


def field_of(path: str) -> str:
    """The error's field: `spec.containers.0.env.0.valueFrom` is refused at its `secretKeyRef`."""
    if path.endswith("env.0.valueFrom"):
        return f"pod_template.{path}.secretKeyRef"
    if path == "spec.nodeSelector":
        return "pod_template.spec.nodeSelector.kubernetes.io/hostname"
    return f"pod_template.{path}"


@pytest.mark.parametrize(("path", "value"), ESCALATIONS, ids=[path for path, _ in ESCALATIONS])
def test_a_pod_template_that_escalates_is_refused_naming_the_field_and_nothing_is_written(client_as, path, value):
    if path.startswith("metadata.labels.") or path.startswith("metadata.annotations."):
        template = copy.deepcopy(TRAINING)
        kind, key = path.split(".", 2)[1:]
        template["metadata"][kind][key] = value
    else:
        template = with_change(path, value)

    response = client_as("vision-researcher").post("/api/v1/jobs/", job_body(pod_template=template), format="json")

    assert response.status_code == 400
    assert field_of(path) in response.json(), response.json()
    assert not Job.objects.exists()


def test_every_refused_field_is_reported_at_once():
    template = with_change("spec.hostNetwork", True)
    template["spec"]["serviceAccountName"] = "gangway"
    template["spec"]["containers"][0]["securityContext"]["privileged"] = True

    assert [field for field, _ in pod_template_violations(template)] == [
        "pod_template.spec.containers.0.securityContext.privileged", "pod_template.spec.hostNetwork",
        "pod_template.spec.serviceAccountName",
    ]


@pytest.mark.parametrize(
    ("template", "field", "reason"),
    [
        pytest.param("train", "pod_template", "must be an object", id="a template that is not an object"),
        pytest.param({"metadata": {}}, "pod_template.spec", "required", id="a template without a spec"),
        pytest.param({"spec": {"containers": []}}, "pod_template.spec.containers", "must be a non-empty list", id="no containers"),
        pytest.param({"spec": {"containers": [{"name": "train"}]}}, "pod_template.spec.containers.0.image", "required",
                     id="a container without an image"),
        pytest.param({"spec": {"containers": [{"name": "t", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}},
                     "pod_template.spec.containers.0.volumeMounts.0.name", "no volume named 'data' in spec.volumes",
                     id="a mount of a volume never declared"),
        pytest.param({"spec": {"containers": [{"name": "t", "image": "i"}], "volumes": [{"name": "v"}]}},
                     "pod_template.spec.volumes.0", "must have exactly one of ['emptyDir', 'persistentVolumeClaim', 'configMap']",
                     id="a volume of no kind"),
    ],
)
def test_malformed_templates_name_the_field(template, field, reason):
    assert (field, reason) in pod_template_violations(template)
