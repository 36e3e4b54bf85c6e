"""The manifests in deploy/kubernetes: valid objects for the official client's models, least-privilege RBAC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from scheduling.cluster.kubernetes import KubernetesSettings
from scheduling.cluster.kubernetes.kinds import batch_job, jobset, pytorchjob
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
CUSTOM_RESOURCES = {
    # The fields of each custom resource's spec, from its Go types (JobSet v0.8 jobset_types.go; Training
    # Operator v1.9 pytorch_types.go, common_types.go); the Kubernetes types inside are checked by the client's models.
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): {
        "spec": {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend", "coordinator",
                 "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies"},
        "replicatedJobs": {"name", "groupName", "template", "replicas", "dependsOn"},
    },
    ("kubeflow.org/v1", "PyTorchJob"): {
        "spec": {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"},
        "runPolicy": {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit", "schedulingPolicy",
                      "suspend", "managedBy"},
        "pytorchReplicaSpecs": {"replicas", "template", "restartPolicy"},
    },
}


def documents() -> list[tuple[str, dict]]:
    return [
        (path.name, doc)
        for path in sorted(DEPLOY.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def deserialize(value: dict, model: str):
    return client.ApiClient().deserialize(json.dumps(value), model, "application/json")


@pytest.mark.parametrize("name, doc", [(n, d) for n, d in documents() if (d["apiVersion"], d["kind"]) not in CUSTOM_RESOURCES],
                         ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_a_valid_object_of_its_kind(name, doc):
    model = MODELS[(doc["apiVersion"], doc["kind"])]

    parsed = deserialize(doc, model)

    assert parsed.metadata.name
    assert type(parsed).__name__ == model


@pytest.mark.parametrize("name, doc", [(n, d) for n, d in documents() if (d["apiVersion"], d["kind"]) in CUSTOM_RESOURCES],
                         ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_custom_resource_example_has_only_its_crds_fields_and_valid_pod_templates(name, doc):
    fields = CUSTOM_RESOURCES[(doc["apiVersion"], doc["kind"])]
    spec = doc["spec"]
    assert set(spec) <= fields["spec"] and deserialize(doc["metadata"], "V1ObjectMeta").name
    if doc["kind"] == "JobSet":
        for replicated in spec["replicatedJobs"]:
            assert set(replicated) <= fields["replicatedJobs"] and isinstance(replicated.get("replicas", 1), int)
            assert deserialize(replicated["template"], "V1JobTemplateSpec").spec.template.spec.containers
    else:
        assert set(spec["runPolicy"]) <= fields["runPolicy"]
        assert set(spec["pytorchReplicaSpecs"]) <= {"Master", "Worker"}
        for replica in spec["pytorchReplicaSpecs"].values():
            assert set(replica) <= fields["pytorchReplicaSpecs"] and replica["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode")
            assert deserialize(replica["template"], "V1PodTemplateSpec").spec.containers


def test_the_cluster_role_grants_exactly_what_the_adapter_uses():
    [role] = [doc for _, doc in documents() if doc["kind"] == "ClusterRole"]

    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}

    assert granted == {
        *(("", "nodes", verb) for verb in ("get", "list", "watch")),
        *(("", "pods", verb) for verb in ("get", "list", "watch", "patch")),
        *(("batch", "jobs", verb) for verb in ("get", "list", "watch", "patch", "create")),
        *(("jobset.x-k8s.io", "jobsets", verb) for verb in ("get", "list", "watch", "patch")),
        *(("kubeflow.org", "pytorchjobs", verb) for verb in ("get", "list", "watch", "patch")),
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

    assert (workload.spec.queue, workload.spec.flavor, workload.spec.pod_sets) == ("vision", "NVIDIA-H100-80GB-HBM3", (PodSet("main", 4, 8),))
    assert job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "gangway.dev/admission"}]


def test_the_example_jobset_is_one_gang_of_a_launcher_and_eight_workers():
    [doc] = [doc for name, doc in documents() if name == "example-jobset.yaml"]

    workload = jobset.discover(doc, KubernetesSettings())

    assert (workload.kind, workload.spec.queue, workload.spec.flavor, workload.spec.pod_sets) == (
        "JobSet", "vision", "NVIDIA-H100-80GB-HBM3", (PodSet("launcher", 1, 0), PodSet("workers", 8, 8)))
    assert workload.tolerations, "every role tolerates the GPU taint, so the gang may go to GPU nodes"


def test_the_example_pytorchjob_is_one_gang_of_a_master_and_seven_workers_in_its_kueue_queue():
    [doc] = [doc for name, doc in documents() if name == "example-pytorchjob.yaml"]

    workload = pytorchjob.discover(doc, KubernetesSettings())

    assert (workload.kind, workload.spec.queue, workload.spec.priority_class, workload.spec.pod_sets) == (
        "PyTorchJob", "vision", "high", (PodSet("master", 1, 8), PodSet("worker", 7, 8)))


def test_the_kustomization_lists_every_manifest_but_the_examples():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])

    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"} - {p.name for p in DEPLOY.glob("example-*.yaml")}


def test_only_the_worker_and_the_watcher_hold_cluster_credentials():
    docs = [doc for _, doc in documents()]
    bound = {s["name"] for doc in docs if doc["kind"] in ("ClusterRoleBinding", "RoleBinding") for s in doc["subjects"]}
    pods = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    with_credentials = {name for name, pod in pods.items()
                        if pod["serviceAccountName"] in bound and pod.get("automountServiceAccountToken", True)}
    assert with_credentials == {"gangway-worker", "gangway-watcher"}
    assert all(pods[name]["automountServiceAccountToken"] is False for name in ("gangway-web", "gangway-beat"))
