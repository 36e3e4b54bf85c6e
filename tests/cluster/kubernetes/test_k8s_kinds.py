"""JobSets, PyTorchJobs and Kueue-labelled Jobs over the fake API: discovery of several roles, release of the
whole gang on pinned pods, eviction, readmission, status, and a kind whose CRD is not installed."""

from __future__ import annotations

import json
import logging

import pytest

from k8s_builders import GPU_TOLERATION, a_jobset, a_pytorchjob, a_training_job
from scheduling.cluster.base import GangRelease, WorkloadPhase, WorkloadRef, WorkloadStatus
from scheduling.cluster.kubernetes import ClusterError, ClusterWatcher
from scheduling.core.model import PodPlacement, PodSet

NS = "research"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}


def gates(pod: dict) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or ()]


def pinned(pod: dict) -> str | None:
    return (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")


def placement(pod_sets: dict[str, int]) -> tuple[PodPlacement, ...]:
    """Pod i of pod set s on node "<s>-<i>": every pod on a node of its own, easy to check."""
    return tuple(PodPlacement(pod_set, i, f"{pod_set}-{i}") for pod_set, count in pod_sets.items() for i in range(count))


def jobset_pods(fake, name: str = "llama-jobset") -> list[dict]:
    return fake.list("pods", NS, f"jobset.sigs.k8s.io/jobset-name={name}")


def pytorch_pods(fake, name: str = "bert-ddp") -> list[dict]:
    return fake.list("pods", NS, f"training.kubeflow.org/job-name={name}")


def jobset_pod_slot(pod: dict) -> tuple[str, int]:
    labels = pod["metadata"]["labels"]
    per_job = 4 if labels["jobset.sigs.k8s.io/replicatedjob-name"] == "workers" else 1
    return (labels["jobset.sigs.k8s.io/replicatedjob-name"],
            int(labels["jobset.sigs.k8s.io/job-index"]) * per_job + int(labels["batch.kubernetes.io/job-completion-index"]))


# --- discovery -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "workload", "expected"),
    [
        pytest.param("jobsets", a_jobset(tolerations=[GPU_TOLERATION]),
                     ("JobSet", "llama-jobset", "vision", (PodSet("launcher", 1, 0), PodSet("workers", 8, 8)), (TOLERATION,), None),
                     id="a jobset is one gang with a pod set per replicated job: replicas x parallelism pods"),
        pytest.param("pytorchjobs", a_pytorchjob(workers=7, tolerations=[GPU_TOLERATION]),
                     ("PyTorchJob", "bert-ddp", "vision", (PodSet("master", 1, 8), PodSet("worker", 7, 8)), (TOLERATION,), None),
                     id="a pytorchjob is one gang of its master and worker replicas"),
        pytest.param("jobs", {**a_training_job(queue=None, pods=2), "metadata": {
                         "name": "from-kueue", "namespace": NS,
                         "labels": {"kueue.x-k8s.io/queue-name": "vision", "kueue.x-k8s.io/priority-class": "high"}}},
                     ("Job", "from-kueue", "vision", (PodSet("main", 2, 8),), (), "high"),
                     id="a job labelled for kueue is in the queue its queue-name label names, at its priority class"),
        pytest.param("jobs", {**a_training_job(queue="vision", pods=2), "metadata": {
                         "name": "both", "namespace": NS,
                         "labels": {"gangway.dev/queue": "vision", "kueue.x-k8s.io/queue-name": "elsewhere"}}},
                     ("Job", "both", "vision", (PodSet("main", 2, 8),), (), None),
                     id="gangway's queue label wins over kueue's"),
    ],
)
def test_each_kind_is_discovered_as_one_gang_of_its_roles(fake, cluster, resource, workload, expected):
    fake.create(resource, workload)

    [found] = cluster.list_workloads()

    assert (found.kind, found.name, found.spec.queue, found.spec.pod_sets, found.tolerations, found.spec.priority_class) == expected


def test_a_toleration_only_some_roles_hold_does_not_make_the_gang_tolerate_the_taint(fake, cluster):
    jobset = a_jobset(tolerations=[GPU_TOLERATION])
    del jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["tolerations"]
    fake.create("jobsets", jobset)

    [found] = cluster.list_workloads()

    assert found.tolerations == ()


@pytest.mark.parametrize(
    ("resource", "workload"),
    [
        pytest.param("jobsets", a_jobset(suspend=False), id="skip a jobset that is not suspended"),
        pytest.param("jobsets", a_jobset(queue=None), id="skip a jobset without a queue label"),
        pytest.param("pytorchjobs", a_pytorchjob(suspend=False), id="skip a pytorchjob that is not suspended"),
        pytest.param("pytorchjobs", {**a_pytorchjob(), "spec": {**a_pytorchjob()["spec"], "elasticPolicy": {"maxReplicas": 8}}},
                     id="skip an elastic pytorchjob: a gang has a fixed size"),
    ],
)
def test_workloads_of_the_new_kinds_that_are_not_ours_are_not_discovered(fake, cluster, resource, workload):
    fake.create(resource, workload)

    assert cluster.list_workloads() == []


# --- a JobSet: release, pinning, eviction, readmission ---------------------------------------------


def test_a_jobset_is_released_whole_no_gate_removed_before_every_pod_of_every_role_exists_and_is_pinned(fake, cluster):
    fake.create("jobsets", a_jobset())
    fake.sync_jobset(NS, "llama-jobset")  # suspended: the controller makes suspended child Jobs, no pods
    ref = WorkloadRef(7, 1, NS, "llama-jobset", kind="JobSet")
    pod_sets = {"launcher": 1, "workers": 8}

    cluster.release(GangRelease(ref, placement(pod_sets)), now=0.0)

    jobset = fake.get("jobsets", NS, "llama-jobset")
    assert jobset["spec"]["suspend"] is False
    assert json.loads(jobset["metadata"]["annotations"]["gangway.dev/placement"]) == {
        "launcher": {"0": "launcher-0"}, "workers": {str(i): f"workers-{i}" for i in range(8)}}
    for rj in jobset["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        assert template["metadata"]["annotations"]["gangway.dev/admission-generation"] == "1"
        assert gates(template) == ["gangway.dev/admission"]

    children = fake.sync_jobset(NS, "llama-jobset")
    assert children == ["llama-jobset-launcher-0", "llama-jobset-workers-0", "llama-jobset-workers-1"]
    assert all(fake.get("jobs", NS, child)["spec"]["suspend"] is False for child in children)

    # The child Jobs' controllers create the gated pods one at a time, roles interleaved.
    order = [("llama-jobset-workers-0", i) for i in range(4)] + [("llama-jobset-launcher-0", 0)] + [
        ("llama-jobset-workers-1", i) for i in range(4)]
    for step, (child, index) in enumerate(order):
        pod = fake.create_job_pod(NS, child, index)
        assert cluster.pin_gang_of(pod) is (step == len(order) - 1)
        pods = jobset_pods(fake)
        assert all(pinned(p) == "{}-{}".format(*jobset_pod_slot(p)) for p in pods)
        if step < len(order) - 1:
            assert all(gates(p) == ["gangway.dev/admission"] for p in pods), "a gate was removed before the gang existed"

    assert len(jobset_pods(fake)) == 9 and all(gates(p) == [] for p in jobset_pods(fake))
    patches = [body for _, _, _, body in fake.requests_matching("PATCH", "/pods/")]
    first_ungate = next(i for i, body in enumerate(patches) if "schedulingGates" in body["spec"])
    assert len(patches[first_ungate:]) == 9 and all("schedulingGates" in body["spec"] for body in patches[first_ungate:])

    for pod in jobset_pods(fake):
        fake.run_pod(NS, pod["metadata"]["name"])
    assert cluster.workload_statuses([ref], now=1.0) == {7: WorkloadStatus(7, WorkloadPhase.RUNNING, 1, 9)}


def test_an_evicted_jobset_is_suspended_and_readmitted_on_new_nodes(fake, cluster):
    fake.create("jobsets", a_jobset(roles=(("launcher", 1, 1, 0), ("workers", 1, 2, 8))))
    first = GangRelease(WorkloadRef(7, 1, NS, "llama-jobset", kind="JobSet"), placement({"launcher": 1, "workers": 2}))
    cluster.release(first, now=0.0)
    fake.sync_jobset(NS, "llama-jobset")
    for child, index in (("llama-jobset-launcher-0", 0), ("llama-jobset-workers-0", 0), ("llama-jobset-workers-0", 1)):
        fake.create_job_pod(NS, child, index)
    assert cluster.pin_released_gangs() == 1

    cluster.suspend(first.workload, now=1.0)
    cluster.suspend(first.workload, now=2.0)  # idempotent

    assert fake.get("jobsets", NS, "llama-jobset")["spec"]["suspend"] is True
    fake.sync_jobset(NS, "llama-jobset")
    assert jobset_pods(fake) == [] and fake.get("jobs", NS, "llama-jobset-workers-0")["spec"]["suspend"] is True
    assert cluster.workload_statuses([first.workload], now=2.0) == {7: WorkloadStatus(7, WorkloadPhase.SUSPENDED)}
    assert [w.name for w in cluster.list_workloads()] == ["llama-jobset"], "suspended again, it is listed again"

    second = GangRelease(WorkloadRef(7, 2, NS, "llama-jobset", kind="JobSet"), (
        PodPlacement("launcher", 0, "gpu-009"), PodPlacement("workers", 0, "gpu-010"), PodPlacement("workers", 1, "gpu-011")))
    cluster.release(first, now=3.0)  # a replay of the old release does not resurrect the evicted gang
    assert fake.get("jobsets", NS, "llama-jobset")["spec"]["suspend"] is True
    cluster.release(second, now=4.0)
    fake.sync_jobset(NS, "llama-jobset")
    for child, index in (("llama-jobset-launcher-0", 0), ("llama-jobset-workers-0", 0), ("llama-jobset-workers-0", 1)):
        fake.create_job_pod(NS, child, index)
    assert cluster.pin_released_gangs() == 1
    assert sorted(pinned(p) for p in jobset_pods(fake)) == ["gpu-009", "gpu-010", "gpu-011"]
    assert all(gates(p) == [] for p in jobset_pods(fake))


def test_a_jobset_placement_missing_a_role_is_refused(fake, cluster):
    fake.create("jobsets", a_jobset())
    release = GangRelease(WorkloadRef(7, 1, NS, "llama-jobset", kind="JobSet"), placement({"workers": 8}))

    with pytest.raises(ClusterError, match=r"no node for pod set 'launcher' indexes \[0\]"):
        cluster.release(release, now=0.0)

    assert fake.get("jobsets", NS, "llama-jobset")["spec"]["suspend"] is True


def test_a_finished_jobset_reports_its_outcome(fake, cluster):
    fake.create("jobsets", a_jobset())
    ref = WorkloadRef(7, 1, NS, "llama-jobset", kind="JobSet")
    cluster.release(GangRelease(ref, placement({"launcher": 1, "workers": 8})), now=0.0)

    fake.modify("jobsets", NS, "llama-jobset", lambda js: js.setdefault("status", {}).update(
        conditions=[{"type": "Completed", "status": "True"}]))

    assert cluster.workload_statuses([ref], now=1.0)[7].phase is WorkloadPhase.SUCCEEDED


# --- a PyTorchJob ----------------------------------------------------------------------------------


def test_a_pytorchjob_is_released_on_pinned_pods_then_evicted_through_its_run_policy(fake, cluster):
    fake.create("pytorchjobs", a_pytorchjob(workers=7))
    ref = WorkloadRef(8, 1, NS, "bert-ddp", kind="PyTorchJob")

    cluster.release(GangRelease(ref, placement({"master": 1, "worker": 7})), now=0.0)

    job = fake.get("pytorchjobs", NS, "bert-ddp")
    assert job["spec"]["runPolicy"]["suspend"] is False
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        assert spec["template"]["metadata"]["annotations"]["gangway.dev/admission-generation"] == "1"
        assert spec["template"]["metadata"]["labels"]["gangway.dev/managed"] == "true"
    replicas = [("Worker", i) for i in range(7)] + [("Master", 0)]
    for step, (replica_type, index) in enumerate(replicas):
        pod = fake.create_pytorch_pod(NS, "bert-ddp", replica_type, index)
        assert cluster.pin_gang_of(pod) is (step == len(replicas) - 1)
        if step < len(replicas) - 1:
            assert all(gates(p) == ["gangway.dev/admission"] for p in pytorch_pods(fake))
    assert {p["metadata"]["name"]: pinned(p) for p in pytorch_pods(fake)} == {
        "bert-ddp-master-0": "master-0", **{f"bert-ddp-worker-{i}": f"worker-{i}" for i in range(7)}}
    assert all(gates(p) == [] for p in pytorch_pods(fake))
    assert cluster.workload_statuses([ref], now=1.0)[8] == WorkloadStatus(8, WorkloadPhase.STARTING, 1, 0)

    cluster.suspend(ref, now=2.0)

    assert fake.get("pytorchjobs", NS, "bert-ddp")["spec"]["runPolicy"]["suspend"] is True
    fake.delete_pytorch_pods(NS, "bert-ddp")
    assert cluster.workload_statuses([ref], now=3.0)[8].phase is WorkloadPhase.SUSPENDED


# --- a kind whose CRD is not installed --------------------------------------------------------------


def test_a_kind_whose_crd_is_not_installed_is_skipped_with_one_log_line(fake, cluster, caplog):
    fake.uninstalled = {"jobsets", "pytorchjobs"}
    fake.create("jobs", a_training_job())
    caplog.set_level(logging.INFO, logger="scheduling.cluster.kubernetes")
    watcher = ClusterWatcher(cluster)

    for _ in range(3):
        assert [w.kind for w in cluster.list_workloads()] == ["Job"]
        watcher.run_once()
    statuses = cluster.workload_statuses([WorkloadRef(9, 1, NS, "gone", kind="JobSet")], now=0.0)

    assert statuses == {9: WorkloadStatus(9, WorkloadPhase.MISSING)}
    assert [w.kind for w in watcher.workloads()] == ["Job"]
    lines = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
    assert len(lines) == 2 and {line.split(" ")[0] for line in lines} == {"JobSet", "PyTorchJob"}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    fake.uninstalled = set()
    fake.create("jobsets", a_jobset())
    assert sorted(w.kind for w in cluster.list_workloads()) == ["Job", "JobSet"]
