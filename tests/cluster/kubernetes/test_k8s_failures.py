"""API failures: conflicts are re-read and retried, server errors back off, the rest fail clearly."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client

from k8s_builders import a_node, a_training_job
from scheduling.cluster.base import GangRelease, WorkloadRef
from scheduling.cluster.kubernetes import ClusterError, KubernetesCluster, KubernetesSettings
from scheduling.core.model import PodPlacement

NS = "research"
RELEASE = GangRelease(
    WorkloadRef(job_id=7, generation=1, namespace=NS, name="llama-70b"),
    tuple(PodPlacement("main", i, f"gpu-00{i}") for i in range(4)),
)
JOB_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs/llama-70b$"


def test_a_conflicting_write_is_re_read_and_retried(fake, cluster):
    fake.create("jobs", a_training_job())
    interfered = []

    def another_writer(method: str, path: str) -> None:
        # Someone (a user's kubectl label) changes the Job between Gangway's read and its patch.
        if method == "PATCH" and path.endswith("/jobs/llama-70b") and not interfered:
            interfered.append(path)
            fake.modify("jobs", NS, "llama-70b", lambda job: job["metadata"]["labels"].update(edited="yes"))

    fake.on_request = another_writer

    cluster.release(RELEASE, now=0.0)

    job = fake.get("jobs", NS, "llama-70b")
    assert (job["spec"]["suspend"], job["metadata"]["labels"]["edited"]) == (False, "yes")
    # read, patch (409), read again, patch; then one more read to pin the (not yet existing) pods.
    assert [r[0] for r in fake.requests if r[1].endswith("/jobs/llama-70b")] == ["GET", "PATCH", "GET", "PATCH", "GET"]


def test_an_injected_409_is_retried_after_a_fresh_read(fake, cluster):
    fake.create("jobs", a_training_job())
    fake.fail("PATCH", JOB_PATH, 409)

    cluster.suspend(WorkloadRef(7, 1, NS, "llama-70b"), now=0.0)  # already suspended: no patch at all
    fake.modify("jobs", NS, "llama-70b", lambda job: job["spec"].update(suspend=False))
    cluster.suspend(WorkloadRef(7, 1, NS, "llama-70b"), now=0.0)

    assert fake.get("jobs", NS, "llama-70b")["spec"]["suspend"] is True
    assert len(fake.requests_matching("PATCH", JOB_PATH)) == 2


def test_endless_conflicts_end_in_a_clear_error(fake, cluster):
    fake.create("jobs", a_training_job())
    fake.fail("PATCH", JOB_PATH, 409, times=100)

    with pytest.raises(ClusterError, match="still conflicting after 4 attempts"):
        cluster.release(RELEASE, now=0.0)


def test_server_errors_back_off_exponentially_then_succeed(fake, cluster, sleeps):
    fake.create("nodes", a_node("gpu-1"))
    fake.fail("GET", "^/api/v1/nodes$", 500, times=2)
    fake.fail("GET", "^/api/v1/pods$", 503, times=1)

    assert [node.name for node in cluster.list_nodes()] == ["gpu-1"]

    assert len(sleeps) == 3
    assert 0.5 <= sleeps[0] <= 0.55 and 1.0 <= sleeps[1] <= 1.1 and 0.5 <= sleeps[2] <= 0.55


def test_server_errors_that_persist_end_in_a_clear_error(fake, cluster, sleeps):
    fake.fail("GET", "^/api/v1/nodes$", 500, times=100)

    with pytest.raises(ClusterError, match=r"list nodes failed after 4 attempt\(s\): 500"):
        cluster.list_nodes()
    assert len(sleeps) == 3


def test_a_forbidden_request_fails_at_once_and_says_why(fake, cluster, sleeps):
    fake.fail("GET", "^/api/v1/nodes$", 403)

    with pytest.raises(ClusterError, match="list nodes failed after 1 attempt.*403") as raised:
        cluster.list_nodes()
    assert raised.value.status == 403
    assert sleeps == []


def test_an_unreachable_api_server_is_retried_then_reported(sleeps):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = False
    settings = KubernetesSettings(retry_attempts=3, request_timeout_s=2)
    cluster = KubernetesCluster(client.ApiClient(configuration), settings, sleep=sleeps.append)

    with pytest.raises(ClusterError, match="list nodes failed after 3 attempt"):
        cluster.list_nodes()
    assert len(sleeps) == 2
