"""The Prometheus (DCGM) collector against a local HTTP server answering as Prometheus does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from scheduling.usage import GpuUsageSample, PrometheusUsageCollector, UsageError

AT = 1735689600.123


def series(metric: str, value: float | str, **labels) -> dict:
    return {"metric": {"__name__": metric, **labels}, "value": [AT, str(value)]}


def vector(*results) -> tuple[int, dict]:
    return 200, {"status": "success", "data": {"resultType": "vector", "result": list(results)}}


# Real dcgm-exporter label sets: the old exporter's `Hostname`, the newer `hostname`, one GPU idle.
OLD = {"gpu": "0", "UUID": "GPU-8f1c", "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3",
       "Hostname": "gpu-001", "container": "trainer", "namespace": "research", "pod": "llama-70b-0-abcde",
       "instance": "10.0.0.5:9400", "job": "dcgm-exporter"}
NEW = {"gpu": "1", "UUID": "GPU-2b7d", "device": "nvidia1", "modelName": "NVIDIA H100 80GB HBM3",
       "hostname": "gpu-002", "container": "notebook", "namespace": "vision", "pod": "jupyter-7",
       "pci_bus_id": "00000000:1B:00.0", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
UNUSED = {"gpu": "2", "UUID": "GPU-0a0a", "Hostname": "gpu-001"}


class FakePrometheus:
    def __init__(self):
        self.answers: dict[str, tuple[int, object]] = {}
        self.queries: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                fake.queries.append({"path": parts.path, **query, "auth": self.headers.get("Authorization")})
                status, body = fake.answers.get(query.get("query", "").split("{")[0], vector())
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prometheus():
    server = FakePrometheus()
    yield server
    server.stop()


def test_samples_join_utilisation_and_memory_per_gpu_under_both_hostname_labels(prometheus):
    prometheus.answers["DCGM_FI_DEV_GPU_UTIL"] = vector(
        series("DCGM_FI_DEV_GPU_UTIL", 97, **OLD), series("DCGM_FI_DEV_GPU_UTIL", 3, **NEW),
        series("DCGM_FI_DEV_GPU_UTIL", 0, **UNUSED), series("DCGM_FI_DEV_GPU_UTIL", "NaN", gpu="3", Hostname="gpu-001"),
    )
    prometheus.answers["DCGM_FI_DEV_FB_USED"] = vector(
        series("DCGM_FI_DEV_FB_USED", 71234, **OLD), series("DCGM_FI_DEV_FB_USED", 512, **NEW),
    )

    samples = PrometheusUsageCollector(prometheus.url, bearer_token="s3cret").collect()

    assert samples == [
        GpuUsageSample("gpu-001", "0", "llama-70b-0-abcde", "research", 97.0, 71234.0, AT),
        GpuUsageSample("gpu-001", "2", None, None, 0.0, None, AT),
        GpuUsageSample("gpu-002", "1", "jupyter-7", "vision", 3.0, 512.0, AT),
    ]
    assert [q["path"] for q in prometheus.queries] == ["/api/v1/query"] * 2
    assert prometheus.queries[0]["auth"] == "Bearer s3cret"


def test_a_selector_and_a_time_are_passed_to_prometheus(prometheus):
    PrometheusUsageCollector(prometheus.url, selector='cluster="prod"').collect(at=AT)

    assert prometheus.queries[0]["query"] == 'DCGM_FI_DEV_GPU_UTIL{cluster="prod"}'
    assert prometheus.queries[0]["time"] == f"{AT:.3f}"


@pytest.mark.parametrize(
    "answer, message",
    [
        pytest.param(
            (422, {"status": "error", "errorType": "execution", "error": "query timed out in expression evaluation"}),
            "HTTP 422: execution: query timed out", id="an error response",
        ),
        pytest.param(
            (200, {"status": "error", "errorType": "bad_data", "error": "parse error"}),
            "bad_data: parse error", id="status error with 200",
        ),
        pytest.param((503, b"Service Unavailable"), "HTTP 503: Service Unavailable", id="a non-200 without JSON"),
        pytest.param((200, b"<html>login</html>"), "invalid JSON", id="not JSON (an auth proxy page)"),
        pytest.param(
            (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}),
            "answered a matrix, not a vector", id="a range result",
        ),
    ],
)
def test_failures_are_clear_usage_errors(prometheus, answer, message):
    prometheus.answers["DCGM_FI_DEV_GPU_UTIL"] = answer

    with pytest.raises(UsageError, match=message):
        PrometheusUsageCollector(prometheus.url).collect()


def test_an_unreachable_server_is_a_usage_error(prometheus):
    url = prometheus.url
    prometheus.stop()

    with pytest.raises(UsageError, match="unreachable"):
        PrometheusUsageCollector(url, timeout_s=2).collect()


def test_the_url_comes_from_the_environment():
    collector = PrometheusUsageCollector.from_env({"GANGWAY_PROMETHEUS_URL": "http://prometheus:9090/"})

    assert collector.base_url == "http://prometheus:9090"
    with pytest.raises(UsageError, match="GANGWAY_PROMETHEUS_URL"):
        PrometheusUsageCollector.from_env({})
