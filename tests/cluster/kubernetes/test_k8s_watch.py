"""The watcher: list then watch, callbacks on change, relist on 410 Gone, gang pinning, clean stop."""

from __future__ import annotations

import time

import pytest

from k8s_builders import a_jobset, a_node, a_pod, a_pytorchjob, a_training_job
from scheduling.cluster.base import GangRelease, WorkloadRef
from scheduling.cluster.kubernetes import ClusterWatcher
from scheduling.core.model import PodPlacement

NS = "research"


def eventually(check, timeout_s: float = 8.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            if result is not False:
                return result
            if time.monotonic() > deadline:
                raise AssertionError("condition never held")
        time.sleep(0.05)


class Recorder:
    def __init__(self):
        self.nodes: list[list] = []
        self.workloads: list[list] = []

    def on_nodes(self, nodes):
        self.nodes.append(nodes)

    def on_workloads(self, workloads):
        self.workloads.append(workloads)

    def node_names(self) -> list[str]:
        return [node.name for node in self.nodes[-1]] if self.nodes else []


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def watcher(cluster, recorder):
    watcher = ClusterWatcher(
        cluster, on_nodes=recorder.on_nodes, on_workloads=recorder.on_workloads,
        watch_timeout_s=1, flush_interval_s=0.05, error_delay_s=0.05,
    )
    yield watcher
    watcher.stop()


def test_run_once_lists_everything_and_calls_back_once(fake, watcher, recorder):
    fake.create("nodes", a_node("gpu-1"))
    fake.create("pods", a_pod("notebook", node="gpu-1", gpus=2))
    fake.create("jobs", a_training_job())

    watcher.run_once()
    watcher.run_once()  # nothing changed: no second call

    assert len(recorder.nodes) == 1 and len(recorder.workloads) == 1
    assert [(node.name, node.external_gpus) for node in recorder.nodes[0]] == [("gpu-1", 2)]
    assert [(w.namespace, w.name) for w in recorder.workloads[0]] == [(NS, "llama-70b")]


def test_changes_stream_in_after_the_first_list(fake, watcher, recorder):
    fake.create("nodes", a_node("gpu-1"))
    watcher.start()
    assert recorder.node_names() == ["gpu-1"]

    fake.create("nodes", a_node("gpu-2"))
    eventually(lambda: recorder.node_names() == ["gpu-1", "gpu-2"])

    fake.modify("nodes", "", "gpu-2", lambda node: node["spec"].update(unschedulable=True))
    eventually(lambda: recorder.nodes[-1][1].is_cordoned)

    fake.create("pods", a_pod("notebook", node="gpu-2", gpus=3))
    eventually(lambda: recorder.nodes[-1][1].external_gpus == 3)

    fake.create("jobs", a_training_job())
    eventually(lambda: [w.name for w in recorder.workloads[-1]] == ["llama-70b"])

    fake.delete("nodes", "", "gpu-1")
    eventually(lambda: recorder.node_names() == ["gpu-2"])


def test_a_410_gone_makes_the_watcher_list_again(fake, watcher, recorder):
    fake.create("nodes", a_node("gpu-1"))
    fake.create("nodes", a_node("gpu-2"))
    watcher.start()
    lists_before = watcher.relists["nodes"]

    # The watcher fell behind and history was compacted: the deletion's event is gone for good.
    with fake.atomically():
        fake.compact()
        fake.delete("nodes", "", "gpu-1")
        fake.create("nodes", a_node("gpu-3"))

    eventually(lambda: recorder.node_names() == ["gpu-2", "gpu-3"])
    assert watcher.relists["nodes"] > lists_before
    watches = fake.requests_matching("GET", "^/api/v1/nodes$")
    assert all(query.get("resourceVersion") for _, _, query, _ in watches if query.get("watch") == "true")


def test_a_failing_watch_is_retried(fake, watcher, recorder):
    fake.create("nodes", a_node("gpu-1"))
    watcher.start()
    fake.fail("GET", "^/api/v1/nodes$", 500, times=2)
    time.sleep(1.2)  # let the current watch time out so the next ones fail

    fake.create("nodes", a_node("gpu-2"))

    eventually(lambda: recorder.node_names() == ["gpu-1", "gpu-2"])
    assert fake.faults[0].remaining == 0, "the watch never hit the injected failures"


def test_the_watcher_pins_and_releases_a_gang_as_its_pods_appear(fake, cluster, watcher):
    fake.create("jobs", a_training_job(pods=3))
    watcher.start()
    cluster.release(GangRelease(
        WorkloadRef(7, 1, NS, "llama-70b"), tuple(PodPlacement("main", i, f"gpu-{i}") for i in range(3))
    ), now=0.0)

    names = [fake.create_job_pod(NS, "llama-70b", i)["metadata"]["name"] for i in range(2)]
    eventually(lambda: all(fake.get("pods", NS, n)["spec"].get("nodeSelector") for n in names))
    assert all(fake.get("pods", NS, n)["spec"]["schedulingGates"] for n in names)

    names.append(fake.create_job_pod(NS, "llama-70b", 2)["metadata"]["name"])

    eventually(lambda: all(not fake.get("pods", NS, n)["spec"].get("schedulingGates") for n in names))
    assert [fake.get("pods", NS, n)["spec"]["nodeSelector"]["kubernetes.io/hostname"] for n in names] == [
        "gpu-0", "gpu-1", "gpu-2"]


def test_stop_ends_every_thread_promptly(fake, cluster, recorder):
    watcher = ClusterWatcher(cluster, on_nodes=recorder.on_nodes, watch_timeout_s=30, flush_interval_s=0.05)
    watcher.start()
    threads = list(watcher._threads)

    started = time.monotonic()
    watcher.stop(timeout_s=5)

    assert time.monotonic() - started < 5
    assert not any(thread.is_alive() for thread in threads)


def test_a_gang_whose_pods_appeared_while_nobody_watched_is_released_by_the_next_list(fake, cluster, watcher):
    fake.create("jobs", a_training_job(pods=2))
    cluster.release(GangRelease(
        WorkloadRef(7, 1, NS, "llama-70b"), tuple(PodPlacement("main", i, f"gpu-{i}") for i in range(2))
    ), now=0.0)
    names = [fake.create_job_pod(NS, "llama-70b", i)["metadata"]["name"] for i in range(2)]

    watcher.run_once()

    assert [fake.get("pods", NS, n)["spec"].get("schedulingGates") for n in names] == [None, None]


def test_a_job_that_loses_its_queue_label_leaves_the_workloads(fake, watcher, recorder):
    fake.create("jobs", a_training_job())
    watcher.start()
    assert [w.name for w in recorder.workloads[-1]] == ["llama-70b"]

    fake.modify("jobs", NS, "llama-70b", lambda job: job["metadata"]["labels"].pop("gangway.dev/queue"))

    eventually(lambda: recorder.workloads[-1] == [])
    assert watcher.labelled_workloads()["Job"] == []


def test_jobsets_and_pytorchjobs_stream_in_and_a_jobset_gang_is_released_on_its_last_pod_event(fake, cluster, watcher, recorder):
    watcher.start()

    fake.create("jobsets", a_jobset(roles=(("launcher", 1, 1, 0), ("workers", 1, 2, 8))))
    fake.create("pytorchjobs", a_pytorchjob())
    labelled = a_training_job("from-kueue", queue=None)
    labelled["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "vision"
    fake.create("jobs", labelled)
    eventually(lambda: [(w.kind, w.name) for w in recorder.workloads[-1]] == [
        ("PyTorchJob", "bert-ddp"), ("Job", "from-kueue"), ("JobSet", "llama-jobset")])

    cluster.release(GangRelease(WorkloadRef(7, 1, NS, "llama-jobset", kind="JobSet"), (
        PodPlacement("launcher", 0, "gpu-1"), PodPlacement("workers", 0, "gpu-1"), PodPlacement("workers", 1, "gpu-2"))), now=0.0)
    fake.sync_jobset(NS, "llama-jobset")
    names = [fake.create_job_pod(NS, child, index)["metadata"]["name"]
             for child, index in (("llama-jobset-workers-0", 0), ("llama-jobset-workers-0", 1), ("llama-jobset-launcher-0", 0))]

    eventually(lambda: [fake.get("pods", NS, n)["spec"].get("schedulingGates") for n in names] == [None, None, None])
    eventually(lambda: [w.name for w in recorder.workloads[-1]] == ["bert-ddp", "from-kueue"])
