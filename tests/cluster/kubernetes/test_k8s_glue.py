"""Django glue over the fake Kubernetes API (real HTTP): watch_cluster syncs nodes and discovers Jobs, reconcile
passes release gangs onto pinned pods, eviction and cancellation suspend them, API submissions create Jobs."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command

from k8s_builders import TOPOLOGY, a_node, a_training_job
from k8s_django import H100, a_researchers_client, the_vision_queue, watch_once
from scheduling.cluster.registry import WatchedCluster, get_cluster
from scheduling.core.model import JobState
from scheduling.models import Cohort, FleetSettings, Flavor, Job, JobEvent, Membership, Node, Queue, QueueQuota, QueueUsage, Role, Team, WorkloadRejection
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, cluster_workloads_sync, job_cancel
from tests.conftest import make_user

pytestmark = pytest.mark.django_db
NS = "research"
T0 = 1_800_000_000.0
NODES = {"gpu-001": "r1", "gpu-002": "r1", "gpu-003": "r2", "gpu-004": "r2"}


@pytest.fixture
def nodes(fake):
    for name, rack in NODES.items():
        fake.create("nodes", a_node(name, rack=rack))
    # A CPU node and a GPU node with an unhealthy device: only GPU nodes are synced, allocatable as reported.
    fake.create("nodes", a_node("cpu-001", gpus=0, product=None))
    return NODES


def gates(pod: dict) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or ()]


def job_pods(fake, name: str = "llama-70b") -> list[dict]:
    return fake.list("pods", NS, f"batch.kubernetes.io/job-name={name}")


def test_watch_cluster_once_syncs_gpu_nodes_and_topology_levels(fake, kubeconfig, nodes):
    fake.create("nodes", a_node("gpu-005", allocatable=6, rack="r2", is_cordoned=True))

    output = watch_once()

    assert "5 added" in output
    assert sorted(Node.objects.values_list("name", flat=True)) == [*sorted(NODES), "gpu-005"]
    assert FleetSettings.load().topology_levels == list(TOPOLOGY)
    sick = Node.objects.get(name="gpu-005")
    assert (sick.flavor.name, sick.capacity_gpus, sick.allocatable_gpus, sick.is_unschedulable, sick.labels[TOPOLOGY[1]]) == (
        H100, 8, 6, True, "r2")

    fake.delete("nodes", "", "gpu-005")
    assert "1 removed" in watch_once()
    assert not Node.objects.filter(name="gpu-005").exists()


def test_a_workload_for_an_unknown_queue_is_rejected_with_a_reason_then_accepted_once_the_queue_exists(fake, kubeconfig, nodes):
    fake.create("jobs", a_training_job(pods=2, queue="vision-main", annotations={"gangway.dev/flavor": H100}))

    output = watch_once()

    assert "rejected workloads: research/llama-70b" in output
    assert not Job.objects.exists()
    rejection = WorkloadRejection.objects.get()
    assert rejection.reason == "unknown_queue" and "unknown queue 'vision-main'" in rejection.message

    the_vision_queue()
    assert "discovered jobs" in watch_once()
    job = Job.objects.get()
    assert (job.state, job.queue.name, job.flavor.name, job.gpus, job.cluster_namespace, job.cluster_name) == (
        JobState.PENDING, "vision-main", H100, 16, NS, "llama-70b")
    assert not WorkloadRejection.objects.exists()
    watch_once()
    assert Job.objects.count() == 1, "a workload seen again is the same job"


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        pytest.param(a_training_job(queue="vision-main"), "no_flavor", id="reject a workload without a flavor"),
        pytest.param(a_training_job(queue="vision-main", annotations={"gangway.dev/flavor": "TPU-v5"}), "unknown_flavor",
                     id="reject a workload of a flavor no node has"),
        pytest.param(a_training_job(queue="vision-main", gpus=0, annotations={"gangway.dev/flavor": H100}), "no_gpus",
                     id="reject a workload that asks for no GPUs"),
        pytest.param(a_training_job(queue="vision-main", annotations={"gangway.dev/flavor": H100, "gangway.dev/topology-required": "zone"}),
                     "unknown_topology_level", id="reject an unknown topology level"),
    ],
)
def test_workloads_gangway_cannot_take_are_recorded_not_raised(fake, kubeconfig, nodes, job, reason):
    watch_once()
    the_vision_queue()
    fake.create("jobs", job)

    watch_once()

    assert not Job.objects.exists()
    assert WorkloadRejection.objects.get().reason == reason


def test_a_discovered_gang_is_released_on_pinned_pods_then_runs_then_is_suspended_when_cancelled(fake, cluster, kubeconfig, nodes):
    # GPU nodes carry the usual nvidia.com/gpu taint; the Job's toleration lets its gang onto them.
    for name in NODES:
        fake.modify("nodes", "", name, lambda node: node["spec"].update(taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]))
    watch_once()
    the_vision_queue()
    training = a_training_job(pods=2, queue="vision-main", annotations={
        "gangway.dev/flavor": H100, "gangway.dev/topology-required": TOPOLOGY[1]})
    training["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    fake.create("jobs", training)
    watch_once()
    job = Job.objects.get()
    assert job.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}]
    # Its place in the queue is the Job's creation, not the moment the watcher saw it.
    assert job.submitted_at.isoformat() == "2025-01-01T00:00:00+00:00"
    watched = WatchedCluster(cluster)

    result = reconcile_pass_run(now=T0, cluster=watched)

    assert result.admitted == result.released == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.admission_generation, job.applied_generation) == (JobState.ADMITTED, 1, 1)
    k8s_job = fake.get("jobs", NS, "llama-70b")
    assert k8s_job["spec"]["suspend"] is False
    assert k8s_job["metadata"]["annotations"]["gangway.dev/job-id"] == str(job.pk)
    placement = {p.pod_index: p.node.name for p in job.placements.select_related("node")}
    assert len({NODES[n] for n in placement.values()}) == 1, "the required rack holds the whole gang"

    # The Job controller creates the gated pods one by one; each pass pins what exists, ungates none early.
    fake.create_job_pod(NS, "llama-70b", 0)
    reconcile_pass_run(now=T0 + 1, cluster=watched)
    [pod] = job_pods(fake)
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == placement[0] and gates(pod) == ["gangway.dev/admission"]
    fake.create_job_pod(NS, "llama-70b", 1)
    reconcile_pass_run(now=T0 + 2, cluster=watched)
    pods = job_pods(fake)
    assert {int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]): p["spec"]["nodeSelector"]["kubernetes.io/hostname"]
            for p in pods} == placement
    assert all(gates(p) == [] for p in pods)

    for pod in pods:
        fake.run_pod(NS, pod["metadata"]["name"])
    result = reconcile_pass_run(now=T0 + 3, cluster=watched)
    assert result.started == [job.pk]
    assert invariant_violations(cluster=watched) == []

    job_cancel(user=make_user("boss", is_admin=True), job_id=job.pk)
    result = reconcile_pass_run(now=T0 + 4, cluster=watched)
    assert result.suspended == [job.pk]
    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True
    assert invariant_violations(cluster=watched) == []


def test_a_gang_whose_pods_never_get_ready_is_evicted_and_its_job_suspended(fake, cluster, kubeconfig, nodes, settings):
    settings.GANGWAY_SCHEDULER = {"pods_ready_timeout_s": 60}
    watch_once()
    the_vision_queue()
    fake.create("jobs", a_training_job(pods=2, queue="vision-main", annotations={"gangway.dev/flavor": H100}))
    watch_once()
    job = Job.objects.get()
    watched = WatchedCluster(cluster)
    reconcile_pass_run(now=T0, cluster=watched)
    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is False

    result = reconcile_pass_run(now=T0 + 61, cluster=watched)

    assert result.evicted == [job.pk] and result.suspended == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.evictions, job.applied_generation) == (JobState.PENDING, 1, 0)
    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True
    # Suspended again, the workload is listed again: it stays the same job.
    watch_once()
    assert Job.objects.count() == 1


def test_a_pending_discovered_job_whose_workload_was_deleted_is_cancelled(fake, cluster, kubeconfig, nodes):
    watch_once()
    the_vision_queue()
    fake.create("jobs", a_training_job(pods=2, queue="vision-main", annotations={"gangway.dev/flavor": H100}))
    watch_once()
    fake.delete("jobs", NS, "llama-70b")

    assert "cancelled jobs (workload deleted)" in watch_once()

    job = Job.objects.get()
    assert job.state == JobState.CANCELLED
    assert job.events.last().reason == "workload_deleted"


def test_a_workload_annotated_with_a_job_id_is_linked_to_that_job_not_duplicated(fake, kubeconfig, nodes):
    watch_once()
    the_vision_queue()
    cluster_workloads_sync(workloads=[])
    existing = Job.objects.create(
        owner=make_user("someone"), queue=Queue.objects.get(), name="made-elsewhere", flavor=Flavor.objects.get(name=H100),
        gpus=16, submitted_at="2027-01-01T00:00:00Z",
    )
    fake.create("jobs", a_training_job(pods=2, queue="vision-main", annotations={
        "gangway.dev/flavor": H100, "gangway.dev/job-id": str(existing.pk)}))

    assert "linked jobs" in watch_once()

    existing.refresh_from_db()
    assert (Job.objects.count(), existing.cluster_namespace, existing.cluster_name) == (1, NS, "llama-70b")


def test_a_job_submitted_through_the_api_with_a_pod_template_is_created_in_the_cluster_once(
    fake, kubeconfig, nodes, settings, django_capture_on_commit_callbacks
):
    settings.GANGWAY_CLUSTER = "kubernetes"
    settings.GANGWAY_NAMESPACE = NS
    watch_once()
    queue = the_vision_queue()
    client = a_researchers_client(queue)
    template = {"spec": {"containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["torchrun", "train.py"]}]}}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/jobs/", {
            "name": "Llama Pretrain", "queue": "vision-main", "flavor": H100,
            "pod_sets": [{"name": "main", "count": 2, "gpus_per_pod": 8}], "pod_template": template,
        }, format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    assert response.json()["workload"] == {"kind": "Job", "namespace": NS, "name": f"llama-pretrain-{job_id}"}

    k8s_job = fake.get("jobs", NS, f"llama-pretrain-{job_id}")
    assert k8s_job["spec"]["suspend"] is True and k8s_job["spec"]["parallelism"] == 2
    assert k8s_job["metadata"]["annotations"]["gangway.dev/job-id"] == str(job_id)
    assert k8s_job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert gates(k8s_job["spec"]["template"]) == ["gangway.dev/admission"]

    watch_once()
    assert Job.objects.count() == 1, "discovering the Job Gangway created does not make a second job"

    # The pass releases it through the adapter the registry builds from the same environment.
    result = reconcile_pass_run(now=T0)
    assert result.released == [job_id]
    assert fake.get("jobs", NS, f"llama-pretrain-{job_id}")["spec"]["suspend"] is False
    assert isinstance(get_cluster(), WatchedCluster)


def test_a_job_with_a_pod_template_whose_creation_was_lost_is_created_by_the_pass_before_release(fake, kubeconfig, nodes, settings):
    settings.GANGWAY_CLUSTER = "kubernetes"
    settings.GANGWAY_NAMESPACE = NS
    watch_once()
    queue = the_vision_queue()
    user = make_user("vision-researcher")
    Membership.objects.create(user=user, team=queue.team, role=Role.RESEARCHER)
    from scheduling.services import job_submit

    # Without the commit hook running (a crash right after commit), no Job exists in the cluster yet.
    job = job_submit(user=user, queue_name="vision-main", flavor_name=H100, name="resume", pod_sets=[{"name": "main", "count": 1, "gpus_per_pod": 8}],
                     pod_template={"spec": {"containers": [{"name": "train", "image": "busybox"}]}})
    assert fake.list("jobs", NS) == []

    result = reconcile_pass_run(now=T0)

    assert result.released == [job.pk]
    assert fake.get("jobs", NS, job.cluster_name)["spec"]["suspend"] is False
    assert JobEvent.objects.filter(job=job, reason="admitted").count() == 1


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        pytest.param({}, "pod_template", "required on a Kubernetes cluster", id="reject a submission without a pod template"),
        pytest.param({"pod_template": {"spec": {"containers": []}}}, "pod_template.spec.containers", "non-empty list",
                     id="reject a pod template without containers"),
        pytest.param({"pod_template": {"spec": {"containers": [{"name": "a", "image": "b"}]}},
                      "pod_sets": [{"name": "a", "count": 1, "gpus_per_pod": 8}, {"name": "b", "count": 1, "gpus_per_pod": 8}]},
                     "pod_sets", "exactly one pod set", id="reject a pod template with two pod sets"),
    ],
)
def test_bad_submissions_on_a_kubernetes_cluster_write_nothing(kubeconfig, nodes, settings, extra, field, message):
    settings.GANGWAY_CLUSTER = "kubernetes"
    watch_once()
    queue = the_vision_queue()
    client = a_researchers_client(queue)
    body = {"name": "x", "queue": "vision-main", "flavor": H100, "pod_sets": [{"name": "main", "count": 1, "gpus_per_pod": 8}], **extra}

    response = client.post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 400
    assert any(message in reason for reason in response.json()[field])
    assert not Job.objects.exists()


@pytest.mark.integration
def test_the_watch_cluster_process_streams_nodes_and_jobs_into_the_database(fake, kubeconfig, nodes, transactional_db, tmp_path):
    """`manage.py watch_cluster` as its own process (PostgreSQL, so both processes share the test database)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from django.db import connection

    assert connection.vendor == "postgresql", "run with DATABASE_URL on PostgreSQL (tier 2)"
    db = connection.settings_dict
    env = {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
           "GANGWAY_VAR_DIR": str(tmp_path), "GANGWAY_KUBE_WATCH_TIMEOUT_SECONDS": "2", "GANGWAY_RECONCILE_ON_WRITE": "0"}
    log = open(tmp_path / "watcher.log", "w")
    process = subprocess.Popen([sys.executable, "manage.py", "watch_cluster"], cwd=Path(__file__).resolve().parents[3],
                               env=env, stdout=log, stderr=subprocess.STDOUT)

    def eventually(condition, what):
        deadline = time.monotonic() + 30
        while not condition():
            assert process.poll() is None, (tmp_path / "watcher.log").read_text()
            assert time.monotonic() < deadline, f"{what}\n{(tmp_path / 'watcher.log').read_text()}"
            time.sleep(0.2)

    try:
        eventually(lambda: Node.objects.count() == len(NODES), "the nodes were never synced")
        the_vision_queue()
        fake.create("nodes", a_node("gpu-009", rack="r3"))
        fake.create("jobs", a_training_job(pods=2, queue="vision-main", annotations={"gangway.dev/flavor": H100}))
        eventually(lambda: Node.objects.filter(name="gpu-009").exists(), "a new node never arrived")
        eventually(lambda: Job.objects.filter(cluster_name="llama-70b").exists(), "the labelled Job was never discovered")
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def test_a_discovered_job_stays_as_its_owner_made_it_even_where_a_submitted_template_would_be_refused(fake, kubeconfig, nodes):
    watch_once()
    the_vision_queue()
    training = a_training_job(pods=1, queue="vision-main", annotations={"gangway.dev/flavor": H100})
    training["spec"]["template"]["spec"].update(hostNetwork=True, serviceAccountName="trainer")
    fake.create("jobs", training)

    watch_once()

    job = Job.objects.get()
    assert job.state == JobState.PENDING and job.pod_template is None, "managed, not rewritten or re-checked"
    assert fake.get("jobs", training["metadata"]["namespace"], training["metadata"]["name"])["spec"]["template"]["spec"]["hostNetwork"] is True


def test_a_workload_labelled_with_a_kueue_priority_class_runs_at_that_gangway_class(fake, kubeconfig, nodes):
    from scheduling.services import priority_class_create

    watch_once()
    queue = the_vision_queue()
    high = priority_class_create(actor=make_user("root", is_admin=True), name="high", value=10)
    job = a_training_job(queue="vision-main", annotations={"gangway.dev/flavor": H100})
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    fake.create("jobs", job)

    watch_once()

    assert Job.objects.values_list("queue", "priority_class", "priority").get() == (queue.pk, high.pk, 10)


def test_a_workload_labelled_with_an_unknown_priority_class_is_rejected_with_the_reason(fake, kubeconfig, nodes):
    watch_once()
    the_vision_queue()
    job = a_training_job(queue="vision-main", annotations={"gangway.dev/flavor": H100})
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "platinum"
    fake.create("jobs", job)

    watch_once()

    assert not Job.objects.exists()
    rejection = WorkloadRejection.objects.get()
    assert (rejection.reason, "unknown priority class 'platinum'" in rejection.message) == ("unknown_priority_class", True)
