"""Settings of the Kubernetes adapter, read from the environment, and the client they configure."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

DEFAULT_FLAVOR_LABEL = "nvidia.com/gpu.product"


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class KubernetesSettings:
    flavor_label: str = DEFAULT_FLAVOR_LABEL
    topology_labels: tuple[str, ...] = ()
    """Node label keys above the node level, coarsest first."""
    namespaces: tuple[str, ...] = ()
    """Namespaces whose pods and jobs are read; empty means all of them."""
    kubeconfig: str | None = None
    """Path of a kubeconfig file; None means in-cluster config when available, else ~/.kube/config."""
    context: str | None = None
    retry_attempts: int = 5
    """Attempts per API call on 5xx, 429 and connection errors (and per conflict loop on 409)."""
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 8.0
    request_timeout_s: float = 30.0
    watch_timeout_s: int = 300
    """Server-side timeout of one watch request; the loop re-watches from the last resource version."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KubernetesSettings:
        env = os.environ if environ is None else environ
        return cls(
            flavor_label=env.get("GANGWAY_FLAVOR_LABEL") or DEFAULT_FLAVOR_LABEL,
            topology_labels=_split(env.get("GANGWAY_TOPOLOGY_LABELS")),
            namespaces=_split(env.get("GANGWAY_NAMESPACES")),
            kubeconfig=env.get("KUBECONFIG") or None,
            context=env.get("GANGWAY_KUBE_CONTEXT") or None,
            retry_attempts=int(env.get("GANGWAY_KUBE_RETRY_ATTEMPTS") or 5),
            watch_timeout_s=int(env.get("GANGWAY_KUBE_WATCH_TIMEOUT_SECONDS") or 300),
        )


def load_api_client(settings: KubernetesSettings, environ: Mapping[str, str] | None = None):
    """In-cluster config inside a pod (unless KUBECONFIG names a file), else the kubeconfig file."""
    from kubernetes import client, config

    env = os.environ if environ is None else environ
    if settings.kubeconfig is None and env.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    # KUBECONFIG may list several files separated by ':'; the official loader handles the first.
    return config.new_client_from_config(config_file=settings.kubeconfig, context=settings.context)
