"""The manifests in deploy/kubernetes: valid objects for the official client's models, least-privilege RBAC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from scheduling.cluster.kubernetes import KubernetesSettings
from scheduling.cluster.kubernetes.kinds import batch_job
from scheduling.core.model import PodSet

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("batch/v1", "Job"): "V1Job",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
}


def documents() -> list[tuple[str, dict]]:
    return [
        (path.name, doc)
        for path in sorted(DEPLOY.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


@pytest.mark.parametrize("name, doc", documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_a_valid_object_of_its_kind(name, doc):
    model = MODELS[(doc["apiVersion"], doc["kind"])]

    parsed = client.ApiClient().deserialize(json.dumps(doc), model, "application/json")

    assert parsed.metadata.name
    assert type(parsed).__name__ == model


def test_the_cluster_role_grants_exactly_what_the_adapter_uses():
    [role] = [doc for _, doc in documents() if doc["kind"] == "ClusterRole"]

    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}

    assert granted == {
        *(("", "nodes", verb) for verb in ("get", "list", "watch")),
        *(("", "pods", verb) for verb in ("get", "list", "watch", "patch")),
        *(("batch", "jobs", verb) for verb in ("get", "list", "watch", "patch", "create")),
    }


def test_every_deployment_runs_as_the_service_account_with_the_shared_config():
    docs = documents()
    names = {(doc["kind"], doc["metadata"]["name"]) for _, doc in docs}
    deployments = [doc for _, doc in docs if doc["kind"] == "Deployment"]

    assert {d["metadata"]["name"] for d in deployments} == {"gangway-web", "gangway-worker", "gangway-beat", "gangway-watcher"}
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert ("ServiceAccount", pod["serviceAccountName"]) in names
        for source in pod["containers"][0]["envFrom"]:
            kind, ref = ("ConfigMap", source["configMapRef"]) if "configMapRef" in source else ("Secret", source["secretRef"])
            assert (kind, ref["name"]) in names
    singletons = [d for d in deployments if d["metadata"]["name"] in ("gangway-beat", "gangway-watcher")]
    assert all(d["spec"]["replicas"] == 1 and d["spec"]["strategy"]["type"] == "Recreate" for d in singletons)


def test_the_example_training_job_is_discovered_as_a_gang_of_four_pods_of_eight_gpus():
    [job] = [doc for name, doc in documents() if name == "example-training-job.yaml"]
    settings = KubernetesSettings(topology_labels=("cloud.google.com/gce-topology-block",))

    workload = batch_job.discover(job, settings)

    assert (workload.queue, workload.flavor, workload.pod_sets) == ("vision", "NVIDIA-H100-80GB-HBM3", (PodSet("main", 4, 8),))
    assert job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "gangway.dev/admission"}]


def test_the_kustomization_lists_every_manifest_but_the_example():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])

    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml", "example-training-job.yaml"}


def test_only_the_worker_and_the_watcher_hold_cluster_credentials():
    docs = [doc for _, doc in documents()]
    bound = {s["name"] for doc in docs if doc["kind"] in ("ClusterRoleBinding", "RoleBinding") for s in doc["subjects"]}
    pods = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    with_credentials = {name for name, pod in pods.items()
                        if pod["serviceAccountName"] in bound and pod.get("automountServiceAccountToken", True)}
    assert with_credentials == {"gangway-worker", "gangway-watcher"}
    assert all(pods[name]["automountServiceAccountToken"] is False for name in ("gangway-web", "gangway-beat"))
