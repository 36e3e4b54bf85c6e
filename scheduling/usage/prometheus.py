"""Collect per-GPU utilisation and memory from a Prometheus server scraping NVIDIA's DCGM exporter."""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable, Mapping

UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
FB_USED_METRIC = "DCGM_FI_DEV_FB_USED"

# dcgm-exporter has spelled these differently across versions, and Prometheus renames clashing
# target labels to exported_*; the first label present wins.
NODE_LABELS = ("Hostname", "hostname", "node", "kubernetes_node")
POD_LABELS = ("pod", "exported_pod", "pod_name")
NAMESPACE_LABELS = ("namespace", "exported_namespace", "pod_namespace")
GPU_LABELS = ("gpu", "minor_number", "UUID", "uuid", "device")


class UsageError(Exception):
    """The metrics source could not be read or answered with something other than samples."""


@dataclass(frozen=True, slots=True)
class GpuUsageSample:
    node: str
    gpu: str
    """The GPU's index on its node ("0".."7"), or its UUID when the index is not exported."""
    pod: str | None
    namespace: str | None
    util_percent: float
    fb_used_mib: float | None
    at: float
    """Unix seconds of the sample."""
    job_id: int | None = None
    """Known only to the simulated source; Prometheus samples are matched to jobs by pod."""


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        if labels.get(name):
            return labels[name]
    return None


class PrometheusUsageCollector:
    """One instant query per metric against `/api/v1/query`, joined per GPU."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        bearer_token: str | None = None,
        selector: str = "",
        clock: Callable[[], float] = time.time,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.bearer_token = bearer_token
        self.selector = selector
        """PromQL label matchers added to both queries, e.g. 'cluster="prod"'."""
        self.clock = clock

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PrometheusUsageCollector:
        env = os.environ if environ is None else environ
        url = env.get("GANGWAY_PROMETHEUS_URL")
        if not url:
            raise UsageError("GANGWAY_PROMETHEUS_URL is not set")
        return cls(
            url,
            timeout_s=float(env.get("GANGWAY_PROMETHEUS_TIMEOUT_SECONDS") or 10),
            bearer_token=env.get("GANGWAY_PROMETHEUS_TOKEN") or None,
            selector=env.get("GANGWAY_PROMETHEUS_SELECTOR", ""),
        )

    def query(self, promql: str, at: float | None = None) -> list[dict]:
        """The `result` of an instant query that must answer with a vector."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.base_url}/api/v1/query?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.bearer_token:
            request.add_header("Authorization", f"Bearer {self.bearer_token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            # Prometheus answers 400/422/503 with a JSON error body that says what was wrong.
            detail = exc.read()[:500].decode("utf-8", "replace")
            try:
                body = json.loads(detail)
                detail = f"{body.get('errorType')}: {body.get('error')}"
            except (ValueError, AttributeError):
                pass
            raise UsageError(f"Prometheus query {promql!r} failed with HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise UsageError(f"Prometheus at {self.base_url} is unreachable: {exc}") from exc
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"Prometheus query {promql!r} answered with invalid JSON: {raw[:100]!r}") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            kind = body.get("errorType") if isinstance(body, dict) else None
            raise UsageError(f"Prometheus query {promql!r} failed: {kind}: {error}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise UsageError(f"Prometheus query {promql!r} answered a {data.get('resultType')}, not a vector")
        return data.get("result") or []

    def _metric(self, name: str) -> str:
        return f"{name}{{{self.selector}}}" if self.selector else name

    def collect(self, at: float | None = None) -> list[GpuUsageSample]:
        """Every GPU the exporter reports, with the pod using it when there is one."""
        util = self.query(self._metric(UTIL_METRIC), at)
        memory = self.query(self._metric(FB_USED_METRIC), at)
        fb_used = {}
        for series in memory:
            identity = self._identity(series.get("metric") or {})
            value = _value(series)
            if identity and value is not None:
                fb_used[identity] = value[1]
        samples = []
        for series in util:
            labels = series.get("metric") or {}
            identity = self._identity(labels)
            value = _value(series)
            if identity is None or value is None:
                continue
            sampled_at, util_percent = value
            samples.append(GpuUsageSample(
                node=identity[0],
                gpu=identity[1],
                pod=_first(labels, POD_LABELS),
                namespace=_first(labels, NAMESPACE_LABELS),
                util_percent=util_percent,
                fb_used_mib=fb_used.get(identity),
                at=sampled_at if at is None else at,
            ))
        return sorted(samples, key=lambda s: (s.node, s.gpu))

    @staticmethod
    def _identity(labels: Mapping[str, str]) -> tuple[str, str] | None:
        node, gpu = _first(labels, NODE_LABELS), _first(labels, GPU_LABELS)
        return (node, gpu) if node and gpu else None


def _value(series: Mapping) -> tuple[float, float] | None:
    """(timestamp, value) of an instant-vector sample; None for NaN, which DCGM reports for lost GPUs."""
    try:
        timestamp, raw = series["value"]
        value = float(raw)
    except (KeyError, TypeError, ValueError):
        return None
    return None if math.isnan(value) else (float(timestamp), value)
