"""Adapters that hide where the cluster lives: simulated fleet or Kubernetes."""
