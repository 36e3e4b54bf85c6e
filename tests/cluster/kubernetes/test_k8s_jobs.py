"""Managed Jobs: discovery, gang release with pinned pods, eviction, status, and creation from Gangway."""

from __future__ import annotations

import json

import pytest

from k8s_builders import a_container, a_training_job
from scheduling.cluster.base import DiscoveredWorkload, GangRelease, WorkloadPhase, WorkloadRef, WorkloadSpec, WorkloadStatus
from scheduling.cluster.kubernetes import ClusterError
from scheduling.core.model import PodPlacement, PodSet

NS = "research"
NODES = ("gpu-001", "gpu-002", "gpu-003", "gpu-004")


def placement_of(pods: int = 4) -> tuple[PodPlacement, ...]:
    return tuple(PodPlacement(pod_set="main", index=i, node=NODES[i]) for i in range(pods))


def a_release(job_id: int = 7, generation: int = 1, name: str = "llama-70b") -> GangRelease:
    return GangRelease(WorkloadRef(job_id=job_id, generation=generation, namespace=NS, name=name), placement_of())


def gates(pod: dict) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or ()]


def job_pods(fake, name: str = "llama-70b") -> list[dict]:
    return fake.list("pods", NS, f"batch.kubernetes.io/job-name={name}")


# --- discovery -------------------------------------------------------------------------------------


def test_a_labelled_suspended_indexed_job_is_discovered_with_its_gang_shape(fake, cluster):
    fake.create("jobs", a_training_job(annotations={
        "gangway.dev/priority": "100",
        "gangway.dev/topology-required": "example.com/block",
        "gangway.dev/topology-preferred": "example.com/rack",
        "gangway.dev/runtime-limit-seconds": "86400",
        "gangway.dev/checkpoint-interval-seconds": "1800",
        "gangway.dev/preemptible": "false",
        "gangway.dev/flavor": "NVIDIA-H100-80GB-HBM3",
        "unrelated": "kept out",
    }))

    assert cluster.list_workloads() == [
        DiscoveredWorkload(
            namespace=NS,
            name="llama-70b",
            spec=WorkloadSpec(
                queue="vision",
                flavor="NVIDIA-H100-80GB-HBM3",
                pod_sets=(PodSet(name="main", count=4, gpus_per_pod=8),),
                priority=100,
                topology_required="example.com/block",
                topology_preferred="example.com/rack",
                runtime_limit_s=86400,
                checkpoint_interval_s=1800,
                is_preemptible=False,
            ),
            annotations={
                "gangway.dev/priority": "100",
                "gangway.dev/topology-required": "example.com/block",
                "gangway.dev/topology-preferred": "example.com/rack",
                "gangway.dev/runtime-limit-seconds": "86400",
                "gangway.dev/checkpoint-interval-seconds": "1800",
                "gangway.dev/preemptible": "false",
                "gangway.dev/flavor": "NVIDIA-H100-80GB-HBM3",
            },
            created_at=1735689600.0,  # the fake API server's creationTimestamp, 2025-01-01T00:00:00Z
        )
    ]


@pytest.mark.parametrize(
    "job",
    [
        pytest.param(a_training_job(queue=None), id="skip a job without a queue label"),
        pytest.param(a_training_job(suspend=False), id="skip a job that is not suspended"),
        pytest.param(a_training_job(indexed=False), id="skip a job that is not Indexed"),
    ],
)
def test_jobs_that_are_not_ours_are_not_discovered(fake, cluster, job):
    fake.create("jobs", job)

    assert cluster.list_workloads() == []


def test_flavor_falls_back_to_the_node_selector_and_defaults_apply(fake, cluster):
    fake.create("jobs", a_training_job(
        pods=2, gpus=4, node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        annotations={"gangway.dev/priority": "high"},
    ))

    [workload] = cluster.list_workloads()

    assert (workload.spec.flavor, workload.spec.pod_sets, workload.spec.priority, workload.spec.is_preemptible, workload.spec.runtime_limit_s) == (
        "NVIDIA-A100-SXM4-80GB", (PodSet("main", 2, 4),), 0, True, None)


# --- release ---------------------------------------------------------------------------------------


def test_release_unsuspends_the_job_and_records_generation_and_placement(fake, cluster):
    fake.create("jobs", a_training_job())

    cluster.release(a_release(), now=0.0)

    job = fake.get("jobs", NS, "llama-70b")
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["annotations"]["gangway.dev/admission-generation"] == "1"
    assert job["metadata"]["annotations"]["gangway.dev/job-id"] == "7"
    assert json.loads(job["metadata"]["annotations"]["gangway.dev/placement"]) == {"main": {str(i): NODES[i] for i in range(4)}}
    assert job["spec"]["template"]["metadata"]["annotations"]["gangway.dev/admission-generation"] == "1"
    assert job["spec"]["template"]["metadata"]["labels"]["gangway.dev/managed"] == "true"
    assert gates(job["spec"]["template"]) == ["gangway.dev/admission"]


def test_gang_release_pins_each_pod_and_ungates_none_before_all_exist(fake, cluster):
    fake.create("jobs", a_training_job())
    cluster.release(a_release(), now=0.0)

    # The Job controller creates the gated pods one at a time; Gangway advances the gang after each.
    for index in range(4):
        fake.create_job_pod(NS, "llama-70b", index)
        is_released = cluster.pin_gang(NS, "llama-70b")
        pods = job_pods(fake)
        assert is_released is (index == 3)
        assert {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods} == {
            str(i): NODES[i] for i in range(index + 1)}
        if index < 3:
            assert all(gates(p) == ["gangway.dev/admission"] for p in pods), "a gate was removed before the gang existed"

    assert all(gates(p) == [] for p in job_pods(fake))
    # Every gate came off after the last pin: no ungate request precedes a pin of another pod.
    patches = [body for method, path, _, body in fake.requests_matching("PATCH", "/pods/")]
    first_ungate = next(i for i, body in enumerate(patches) if "schedulingGates" in body["spec"])
    assert all("nodeSelector" in body["spec"] for body in patches[:first_ungate])
    assert all("schedulingGates" in body["spec"] for body in patches[first_ungate:])


def test_a_job_released_with_the_flat_placement_of_earlier_versions_is_still_pinned(fake, cluster):
    fake.create("jobs", a_training_job(pods=2))
    cluster.release(GangRelease(WorkloadRef(7, 1, NS, "llama-70b"), placement_of(2)), now=0.0)
    fake.modify("jobs", NS, "llama-70b", lambda job: job["metadata"]["annotations"].update(
        {"gangway.dev/placement": json.dumps({"0": "gpu-003", "1": "gpu-004"})}))
    for index in range(2):
        fake.create_job_pod(NS, "llama-70b", index)

    assert cluster.pin_gang(NS, "llama-70b")

    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in job_pods(fake)) == ["gpu-003", "gpu-004"]


def test_release_replayed_for_the_same_generation_changes_nothing(fake, cluster):
    fake.create("jobs", a_training_job())
    cluster.release(a_release(), now=0.0)
    job_before = fake.get("jobs", NS, "llama-70b")

    cluster.release(a_release(), now=1.0)

    assert fake.get("jobs", NS, "llama-70b")["metadata"]["resourceVersion"] == job_before["metadata"]["resourceVersion"]


def test_other_gates_stay_on_pods_and_pods_of_another_job_are_left_alone(fake, cluster):
    job = a_training_job(pods=2)
    job["spec"]["template"]["spec"]["schedulingGates"].append({"name": "example.com/quota-check"})
    fake.create("jobs", job)
    fake.create("jobs", a_training_job(name="other", pods=2))
    cluster.release(GangRelease(WorkloadRef(7, 1, NS, "llama-70b"), placement_of(2)), now=0.0)
    cluster.release(GangRelease(WorkloadRef(8, 1, NS, "other"), placement_of(2)), now=0.0)
    fake.create_job_pod(NS, "other", 0)
    for index in range(2):
        fake.create_job_pod(NS, "llama-70b", index)

    assert cluster.pin_released_gangs() == 1

    assert [gates(p) for p in job_pods(fake)] == [["example.com/quota-check"]] * 2
    assert [gates(p) for p in job_pods(fake, "other")] == [["gangway.dev/admission"]]


def test_a_job_without_our_gate_gets_it_on_release(fake, cluster):
    fake.create("jobs", a_training_job(gated=False))

    cluster.release(a_release(), now=0.0)

    assert gates(fake.get("jobs", NS, "llama-70b")["spec"]["template"]) == ["gangway.dev/admission"]


def test_a_partial_placement_is_refused(fake, cluster):
    fake.create("jobs", a_training_job())
    release = GangRelease(WorkloadRef(7, 1, NS, "llama-70b"), placement_of(3))

    with pytest.raises(ClusterError, match=r"no node for completion indexes \[3\]"):
        cluster.release(release, now=0.0)

    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True


def test_releasing_a_missing_job_is_a_clear_error(fake, cluster):
    with pytest.raises(ClusterError, match="does not exist"):
        cluster.release(a_release(), now=0.0)


# --- eviction and readmission ----------------------------------------------------------------------


def test_eviction_suspends_the_job_and_readmission_pins_only_the_new_pods(fake, cluster):
    fake.create("jobs", a_training_job(pods=2))
    first = GangRelease(WorkloadRef(7, 1, NS, "llama-70b"), placement_of(2))
    cluster.release(first, now=0.0)
    for index in range(2):
        fake.create_job_pod(NS, "llama-70b", index)
    assert cluster.pin_gang(NS, "llama-70b")

    cluster.suspend(first.workload, now=1.0)
    cluster.suspend(first.workload, now=2.0)  # idempotent

    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True
    assert cluster.workload_statuses([first.workload], now=2.0) == {7: WorkloadStatus(7, WorkloadPhase.SUSPENDED)}
    assert cluster.list_workloads()[0].annotations["gangway.dev/admission-generation"] == "1"

    # A replay of the old release must not resurrect the evicted gang.
    cluster.release(first, now=3.0)
    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True

    fake.delete_job_pods(NS, "llama-70b")
    second = GangRelease(
        WorkloadRef(7, 2, NS, "llama-70b"),
        (PodPlacement("main", 0, "gpu-009"), PodPlacement("main", 1, "gpu-010")),
    )
    cluster.release(second, now=4.0)
    for index in range(2):
        fake.create_job_pod(NS, "llama-70b", index)
    assert cluster.pin_gang(NS, "llama-70b")
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in job_pods(fake)) == ["gpu-009", "gpu-010"]


def test_suspending_a_missing_job_is_a_no_op(fake, cluster):
    cluster.suspend(WorkloadRef(7, 1, NS, "gone"), now=0.0)


def test_releasing_over_a_running_admission_is_refused(fake, cluster):
    fake.create("jobs", a_training_job())
    cluster.release(a_release(generation=1), now=0.0)

    with pytest.raises(ClusterError, match="suspend it before releasing admission 2"):
        cluster.release(a_release(generation=2), now=1.0)


# --- status ----------------------------------------------------------------------------------------


def test_statuses_follow_the_gang_from_starting_to_running_to_done(fake, cluster):
    fake.create("jobs", a_training_job(pods=2))
    ref = WorkloadRef(7, 1, NS, "llama-70b")
    missing = WorkloadRef(8, 1, NS, "deleted")
    cluster.release(GangRelease(ref, placement_of(2)), now=0.0)
    names = [fake.create_job_pod(NS, "llama-70b", i)["metadata"]["name"] for i in range(2)]
    cluster.pin_gang(NS, "llama-70b")

    assert cluster.workload_statuses([ref, missing], now=1.0) == {
        7: WorkloadStatus(7, WorkloadPhase.STARTING, generation=1, ready_pods=0),
        8: WorkloadStatus(8, WorkloadPhase.MISSING),
    }

    fake.run_pod(NS, names[0])
    assert cluster.workload_statuses([ref], now=2.0)[7].ready_pods == 1
    fake.run_pod(NS, names[1])
    assert cluster.workload_statuses([ref], now=3.0)[7] == WorkloadStatus(7, WorkloadPhase.RUNNING, 1, 2)

    fake.modify("jobs", NS, "llama-70b", lambda job: job.setdefault("status", {}).update(
        conditions=[{"type": "Complete", "status": "True"}]))
    assert cluster.workload_statuses([ref], now=4.0)[7].phase is WorkloadPhase.SUCCEEDED


# --- creation --------------------------------------------------------------------------------------


def test_a_job_submitted_through_gangway_is_created_suspended_gated_and_indexed(fake, cluster):
    template = {"metadata": {"labels": {"app": "resnet"}}, "spec": {"containers": [a_container(0)]}}

    spec = WorkloadSpec(queue="vision", flavor="NVIDIA-H100-80GB-HBM3", pod_sets=(PodSet("main", 4, 8),), priority=5,
                        topology_required="example.com/rack", runtime_limit_s=3600)
    ref = cluster.create_workload(namespace=NS, name="resnet-42", spec=spec, pod_template=template, job_id=42)

    assert ref == WorkloadRef(job_id=42, generation=0, namespace=NS, name="resnet-42")
    job = fake.get("jobs", NS, "resnet-42")
    assert (job["spec"]["suspend"], job["spec"]["completionMode"], job["spec"]["parallelism"]) == (True, "Indexed", 4)
    pod_spec = job["spec"]["template"]["spec"]
    assert gates(job["spec"]["template"]) == ["gangway.dev/admission"]
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert pod_spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert template["spec"].get("schedulingGates") is None, "the caller's template was modified"
    [workload] = cluster.list_workloads()
    assert (workload.spec.queue, workload.spec.pod_sets, workload.spec.priority, workload.spec.topology_required, workload.spec.runtime_limit_s) == (
        "vision", (PodSet("main", 4, 8),), 5, "example.com/rack", 3600)
    assert workload.annotations["gangway.dev/job-id"] == "42"

    # Created again after a crash: the same job, no error; someone else's job of that name: an error.
    assert cluster.create_workload(namespace=NS, name="resnet-42", spec=spec, pod_template=template, job_id=42) == ref
    with pytest.raises(ClusterError, match="already exists"):
        cluster.create_workload(namespace=NS, name="resnet-42", spec=spec, pod_template=template, job_id=43)
