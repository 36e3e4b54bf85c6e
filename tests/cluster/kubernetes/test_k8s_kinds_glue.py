"""The three kinds end to end over the fake API (real HTTP): a JobSet with a launcher and workers, a PyTorchJob
with a Master and Workers, and a Job labelled for Kueue are each discovered by the watcher, admitted onto pinned
nodes in one rack, released gate-free together, evicted and requeued; namespaces a team owns; a submitted pod
template scheduled like a discovered one."""

from __future__ import annotations

import pytest

from k8s_builders import GPU_TOLERATION, TOPOLOGY, a_jobset, a_node, a_pytorchjob, a_training_job
from k8s_django import H100, a_researchers_client, the_vision_queue, watch_once
from scheduling.cluster.registry import WatchedCluster
from scheduling.core.model import JobState
from scheduling.models import Job, Team, TeamNamespace, WorkloadRejection
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run

pytestmark = pytest.mark.django_db
NS = "research"
T0 = 1_800_000_000.0
RACKS = {"r1": 8, "r2": 8}
TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
RACK_REQUIRED = {"gangway.dev/flavor": H100, "gangway.dev/topology-required": TOPOLOGY[1]}


@pytest.fixture
def racks(fake):
    """Two racks of eight 8-GPU nodes, every one tainted nvidia.com/gpu:NoSchedule."""
    for rack, count in RACKS.items():
        for i in range(count):
            fake.create("nodes", a_node(f"{rack}-gpu-{i}", rack=rack, taints=[TAINT]))
    return RACKS


def gates(pod: dict) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or ()]


def pinned(pod: dict) -> str | None:
    return (pod["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")


# Each kind: the workload, how its controller(s) make the gang's pods once released, and how to list them.


def jobset_pods(fake, released: bool = True) -> list[dict]:
    fake.sync_jobset(NS, "llama-jobset")
    if released and not fake.list("pods", NS, "jobset.sigs.k8s.io/jobset-name=llama-jobset"):
        fake.create_job_pod(NS, "llama-jobset-launcher-0", 0)
        for child in range(8):
            fake.create_job_pod(NS, f"llama-jobset-workers-{child}", 0)
    return fake.list("pods", NS, "jobset.sigs.k8s.io/jobset-name=llama-jobset")


def pytorch_pods(fake, released: bool = True) -> list[dict]:
    if released and not fake.list("pods", NS, "training.kubeflow.org/job-name=bert-ddp"):
        fake.create_pytorch_pod(NS, "bert-ddp", "Master", 0)
        for index in range(7):
            fake.create_pytorch_pod(NS, "bert-ddp", "Worker", index)
    if not released:
        fake.delete_pytorch_pods(NS, "bert-ddp")
    return fake.list("pods", NS, "training.kubeflow.org/job-name=bert-ddp")


def kueue_job_pods(fake, released: bool = True) -> list[dict]:
    if released and not fake.list("pods", NS, "batch.kubernetes.io/job-name=from-kueue"):
        for index in range(4):
            fake.create_job_pod(NS, "from-kueue", index)
    if not released:
        fake.delete_job_pods(NS, "from-kueue")
    return fake.list("pods", NS, "batch.kubernetes.io/job-name=from-kueue")


def a_kueue_job() -> dict:
    job = a_training_job("from-kueue", pods=4, queue=None, annotations={"gangway.dev/topology-required": TOPOLOGY[1]},
                         node_selector={"nvidia.com/gpu.product": H100})
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "vision-main"
    job["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    return job


KINDS = [
    pytest.param("jobsets", lambda: a_jobset(queue="vision-main", roles=(("launcher", 1, 1, 0), ("workers", 8, 1, 8)),
                                             annotations=RACK_REQUIRED, tolerations=[GPU_TOLERATION]),
                 jobset_pods, "JobSet", {"launcher": (1, 0), "workers": (8, 8)}, 64,
                 id="a jobset of a launcher (1 pod, 0 GPUs) and workers (8 pods x 8 GPUs)"),
    pytest.param("pytorchjobs", lambda: a_pytorchjob(queue="vision-main", workers=7, annotations=RACK_REQUIRED,
                                                     tolerations=[GPU_TOLERATION]),
                 pytorch_pods, "PyTorchJob", {"master": (1, 8), "worker": (7, 8)}, 64,
                 id="a pytorchjob of one master and seven workers"),
    pytest.param("jobs", a_kueue_job, kueue_job_pods, "Job", {"main": (4, 8)}, 32,
                 id="a batch job labelled for kueue"),
]


@pytest.mark.parametrize(("resource", "workload", "controller", "kind", "shape", "gpus"), KINDS)
def test_each_kind_is_discovered_admitted_in_one_rack_released_together_evicted_and_requeued(
    fake, cluster, kubeconfig, racks, settings, resource, workload, controller, kind, shape, gpus
):
    settings.GANGWAY_SCHEDULER = {"pods_ready_timeout_s": 60}
    # A cordoned node in r2: a gang of eight whole nodes fits only in r1.
    fake.modify("nodes", "", "r2-gpu-0", lambda node: node["spec"].update(unschedulable=True))
    watch_once()
    the_vision_queue(nominal=64)
    fake.create(resource, workload())

    # 1. Discovered: one pending job of the workload's kind and roles.
    assert "discovered jobs" in watch_once()
    job = Job.objects.get()
    assert (job.state, job.cluster_kind, job.gpus, job.tolerations) == (JobState.PENDING, kind, gpus, [
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}])
    assert {p.name: (p.count, p.gpus_per_pod) for p in job.pod_sets.all()} == shape
    watched = WatchedCluster(cluster)

    # 2. Admitted onto nodes of one rack, the workload released with its placement.
    result = reconcile_pass_run(now=T0, cluster=watched)
    assert result.admitted == result.released == [job.pk]
    placement = {(p.pod_set.name, p.pod_index): p.node.name for p in job.placements.select_related("node", "pod_set")}
    assert len(placement) == sum(count for count, _ in shape.values())
    assert len({node.split("-")[0] for node in placement.values()}) == 1, "the required rack holds the whole gang"

    # 3. Its controller makes the gated pods; the pass pins every one and removes all gates together.
    pods = controller(fake)
    assert all(gates(p) == ["gangway.dev/admission"] for p in pods)
    reconcile_pass_run(now=T0 + 1, cluster=watched)
    pods = controller(fake)
    assert sorted(pinned(p) for p in pods) == sorted(placement.values())
    assert all(gates(p) == [] for p in pods)
    assert invariant_violations(cluster=watched) == []

    # 4. Never ready in time: evicted, the workload suspended, the job requeued; readmitted after its backoff.
    result = reconcile_pass_run(now=T0 + 61, cluster=watched)
    assert result.evicted == result.suspended == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.evictions, job.applied_generation) == (JobState.PENDING, 1, 0)
    assert controller(fake, released=False) == []
    watch_once()
    assert Job.objects.count() == 1, "suspended again, the workload is the same job"
    result = reconcile_pass_run(now=T0 + 10_000, cluster=watched)
    assert result.released == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.admission_generation, job.applied_generation) == (JobState.ADMITTED, 2, 2)


def test_a_jobset_admission_committed_but_not_applied_is_released_by_the_next_pass(fake, cluster, kubeconfig, racks, sleeps):
    watch_once()
    the_vision_queue(nominal=64)
    fake.create("jobsets", a_jobset(queue="vision-main", roles=(("launcher", 1, 1, 0), ("workers", 2, 2, 8)),
                                    annotations=RACK_REQUIRED, tolerations=[GPU_TOLERATION]))
    watch_once()
    job = Job.objects.get()
    watched = WatchedCluster(cluster)
    # The API server fails every attempt of the release patch: the pass has committed the admission, not applied it.
    fake.fail("PATCH", "/jobsets/llama-jobset", 503, times=cluster.settings.retry_attempts)

    result = reconcile_pass_run(now=T0, cluster=watched)

    assert result.admitted == result.apply_failed == [job.pk] and result.released == []
    job.refresh_from_db()
    assert (job.state, job.admission_generation, job.applied_generation) == (JobState.ADMITTED, 1, 0)
    assert fake.get("jobsets", NS, "llama-jobset")["spec"]["suspend"] is True

    result = reconcile_pass_run(now=T0 + 1, cluster=watched)

    assert result.released == [job.pk] and result.admitted == []
    job.refresh_from_db()
    assert job.applied_generation == 1
    jobset = fake.get("jobsets", NS, "llama-jobset")
    assert jobset["spec"]["suspend"] is False and jobset["metadata"]["annotations"]["gangway.dev/job-id"] == str(job.pk)
    # Replayed again (a pass that applied but died before recording it): the JobSet is not patched twice.
    version = jobset["metadata"]["resourceVersion"]
    Job.objects.filter(pk=job.pk).update(applied_generation=0)
    assert reconcile_pass_run(now=T0 + 2, cluster=watched).released == [job.pk]
    assert fake.get("jobsets", NS, "llama-jobset")["metadata"]["resourceVersion"] == version


# --- namespaces a team owns --------------------------------------------------------------------------


def test_a_workload_in_a_namespace_whose_team_does_not_own_its_queue_is_rejected_with_the_reason(fake, kubeconfig, racks):
    watch_once()
    queue = the_vision_queue()
    TeamNamespace.objects.create(team=Team.objects.create(name="speech"), name=NS)
    fake.create("jobsets", a_jobset(queue="vision-main", annotations={"gangway.dev/flavor": H100}))

    assert "rejected workloads: research/llama-jobset" in watch_once()

    rejection = WorkloadRejection.objects.get()
    assert rejection.reason == "namespace_not_owned"
    assert rejection.message == ("JobSet research/llama-jobset: namespace 'research' belongs to team speech, which does not "
                                 "own queue 'vision-main' (team vision)")
    assert not Job.objects.exists()

    TeamNamespace.objects.filter(name=NS).update(team=queue.team)
    assert "discovered jobs" in watch_once()
    assert not WorkloadRejection.objects.exists()


# --- a job submitted with a pod template is scheduled like a discovered one -------------------------


def test_a_submitted_pod_template_keeps_its_tolerations_and_goes_to_the_teams_namespace(
    fake, kubeconfig, racks, settings, django_capture_on_commit_callbacks
):
    settings.GANGWAY_CLUSTER = "kubernetes"
    settings.GANGWAY_NAMESPACE = "default"
    watch_once()
    queue = the_vision_queue()
    TeamNamespace.objects.create(team=queue.team, name="vision-jobs")
    client = a_researchers_client(queue)
    template = {"spec": {"tolerations": [GPU_TOLERATION],
                         "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}]}}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/jobs/", {
            "name": "tolerant", "queue": "vision-main", "flavor": H100,
            "pod_sets": [{"name": "main", "count": 2, "gpus_per_pod": 8}], "pod_template": template,
        }, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert response.json()["workload"] == {"kind": "Job", "namespace": "vision-jobs", "name": f"tolerant-{job.pk}"}
    watch_once()
    assert Job.objects.get().tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}]

    # Every node is tainted: without the template's toleration the job would never be admitted.
    result = reconcile_pass_run(now=T0)

    assert result.released == [job.pk]
    assert fake.get("jobs", "vision-jobs", job.cluster_name)["spec"]["suspend"] is False
