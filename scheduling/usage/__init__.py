"""GPU use, as opposed to allocation: Prometheus (DCGM exporter) or simulated samples, as plain records."""

from .prometheus import GpuUsageSample, PrometheusUsageCollector, UsageError
from .simulated import simulated_usage

__all__ = ["GpuUsageSample", "PrometheusUsageCollector", "UsageError", "simulated_usage"]
