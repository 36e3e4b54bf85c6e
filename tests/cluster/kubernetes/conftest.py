"""Fixtures: a fake Kubernetes API on 127.0.0.1 and the official client pointed at it over HTTP."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client

from fakeapi import FakeKubernetes
from k8s_builders import TOPOLOGY
from scheduling.cluster.kubernetes import KubernetesCluster, KubernetesSettings


@pytest.fixture
def fake():
    server = FakeKubernetes().start()
    yield server
    server.stop()


@pytest.fixture
def api_client(fake):
    configuration = client.Configuration(host=fake.url)
    # The adapter does its own retries; urllib3's would hide the 5xx backoff under test.
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    yield api_client
    api_client.close()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def kube_settings():
    return KubernetesSettings(
        topology_labels=TOPOLOGY, retry_attempts=4, retry_base_delay_s=0.5, request_timeout_s=5, watch_timeout_s=2
    )


@pytest.fixture
def cluster(api_client, kube_settings, sleeps):
    return KubernetesCluster(api_client, kube_settings, sleep=sleeps.append)


@pytest.fixture
def kubeconfig(fake, tmp_path, monkeypatch):
    """KUBECONFIG pointing at the fake API, as a user would configure a real cluster."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
        "users": [{"name": "gangway", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "gangway"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("GANGWAY_TOPOLOGY_LABELS", ",".join(TOPOLOGY))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path
