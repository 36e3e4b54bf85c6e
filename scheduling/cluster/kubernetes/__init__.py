"""The Kubernetes adapter: nodes, pods and batch/v1 Jobs through the official client."""

from .api import ClusterError, ConflictError, GoneError
from .cluster import KubernetesCluster
from .config import KubernetesSettings
from .watch import ClusterWatcher

__all__ = ["ClusterError", "ClusterWatcher", "ConflictError", "GoneError", "KubernetesCluster", "KubernetesSettings"]
