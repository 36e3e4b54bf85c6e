"""The live benchmark's measurements: the pass by phase vs the bare SELECTs of its rows, pages and list
endpoints vs a trivial endpoint, and submit throughput vs a trivial endpoint, each interleaved with its baseline."""

from __future__ import annotations

import statistics
import threading
import time

import requests
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduling.models import Job, Node, Placement, PodSet, Queue, QueueQuota
from scheduling.models.jobs import HOLDING_STATES
from scheduling.services import job_submit
from scheduling.services import reconcile as reconcile_module
from scheduling.snapshot_cache import PASS_CACHE

SUBMISSIONS_PER_BUSY_PASS = 50
SETTLE_PASSES = 10
SUBMIT_BODY = {"name": "bench", "queue": "q00", "flavor": "H100-80GB", "pod_sets": [{"name": "worker", "count": 1, "gpus_per_pod": 1}]}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summary_ms(seconds: list[float]) -> dict:
    return {"median_ms": round(statistics.median(seconds) * 1000, 1), "p95_ms": round(percentile(seconds, 0.95) * 1000, 1)}


# --- the pass --------------------------------------------------------------------------------------
def pass_run(now: float, profile_to: str | None = None) -> dict:
    """One pass, timed whole and by the phases it records itself."""
    profiler = _profiler(profile_to)
    started = time.perf_counter()
    result = reconcile_module.reconcile_pass_run(now=now)
    total = time.perf_counter() - started
    if profiler is not None:
        profiler.stop()
        with open(profile_to, "w") as out:
            out.write(profiler.output_html())
    return {"total_s": total, "phases_s": {k: round(v, 3) for k, v in result.phases_s.items()},
            "admitted": len(result.admitted), "finished": len(result.finished)}


def _profiler(path: str | None):
    if not path:
        return None
    from pyinstrument import Profiler

    profiler = Profiler()
    profiler.start()
    return profiler


def floor_run() -> float:
    """The bare SELECTs of the rows a pass reads: each queue's pending window with its pod sets, the jobs
    holding GPUs with pod sets and placements, nodes, queues and quotas; fetched, nothing built."""
    job, pod_set, placement, node = (m._meta.db_table for m in (Job, PodSet, Placement, Node))
    cap = settings.GANGWAY_PENDING_PER_QUEUE
    holding = ", ".join(f"'{s}'" for s in HOLDING_STATES)
    columns = ("id, queue_id, flavor_id, priority, submitted_at, topology_required, topology_preferred, runtime_limit_s, "
               "checkpoint_interval_s, is_preemptible, tolerations, state, admitted_at, started_at, ready_pods, evictions, "
               "backoff_until, preempted_by_id")
    window = f"SELECT id FROM {job} WHERE state = 'pending' AND queue_id = %s ORDER BY priority DESC, submitted_at, id LIMIT %s"
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for queue_id in Queue.objects.values_list("id", flat=True):
            cursor.execute(f"SELECT {columns} FROM {job} WHERE state = 'pending' AND queue_id = %s "
                           f"ORDER BY priority DESC, submitted_at, id LIMIT %s", [queue_id, cap])
            cursor.fetchall()
            cursor.execute(f"SELECT ps.id, ps.job_id, ps.name, ps.count, ps.gpus_per_pod FROM {pod_set} ps "
                           f"JOIN ({window}) w ON w.id = ps.job_id", [queue_id, cap])
            cursor.fetchall()
        cursor.execute(f"SELECT {columns} FROM {job} WHERE state IN ({holding})")
        cursor.fetchall()
        cursor.execute(f"SELECT ps.id, ps.job_id, ps.name, ps.count, ps.gpus_per_pod FROM {pod_set} ps "
                       f"JOIN {job} j ON j.id = ps.job_id WHERE j.state IN ({holding})")
        cursor.fetchall()
        cursor.execute(f"SELECT p.job_id, p.pod_set_id, p.pod_index, p.node_id, p.gpus FROM {placement} p")
        cursor.fetchall()
        cursor.execute(f"SELECT * FROM {node}")
        cursor.fetchall()
    list(Queue.objects.values())
    list(QueueQuota.objects.values())
    return time.perf_counter() - started


def passes_measure(*, submitter, queue_names: list[str], now: float, busy: int, idle: int, profile_dir: str | None) -> dict:
    """The first pass (nothing explained yet), then `busy` passes each a minute later with new submissions; then
    passes a second apart until one finds nothing to do (at most SETTLE_PASSES: the busy passes' admissions start
    running and plans are proposed), then `idle` more passes a second apart; a floor measurement before each; last,
    one pass of a process that remembers nothing (a restarted worker)."""
    floors, busy_runs, idle_runs = [], [], []
    floors.append(floor_run())
    first = pass_run(now)
    for k in range(busy):
        now += 61
        for i in range(SUBMISSIONS_PER_BUSY_PASS):
            job_submit(user=submitter, queue_name=queue_names[i % len(queue_names)], flavor_name="H100-80GB",
                       name="bench-busy", pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 1}], now=now - 1)
        floors.append(floor_run())
        profile = f"{profile_dir}/pass-busy.html" if profile_dir and k == busy - 1 else None
        busy_runs.append(pass_run(now, profile))
    settle = 0
    while settle < SETTLE_PASSES:
        now += 1
        settle += 1
        run = pass_run(now)
        if "explain" not in run["phases_s"] and not run["admitted"] and not run["finished"]:
            break
    for k in range(idle):
        now += 1
        floors.append(floor_run())
        profile = f"{profile_dir}/pass-idle.html" if profile_dir and k == idle - 1 else None
        idle_runs.append(pass_run(now, profile))
    PASS_CACHE.clear()
    now += 1
    cold = pass_run(now)
    core = [r["phases_s"].get("cycle", 0.0) for r in busy_runs]
    return {
        "median_s": round(statistics.median(r["total_s"] for r in busy_runs), 3),
        "floor_s": round(statistics.median(floors), 3),
        "core_s": round(statistics.median(core), 3),
        "idle_s": round(statistics.median(r["total_s"] for r in idle_runs), 3),
        "first_s": round(first["total_s"], 3),
        "cold_s": round(cold["total_s"], 3),
        "settle_passes": settle,
        "first_phases_s": first["phases_s"],
        "busy_phases_s": busy_runs[len(busy_runs) // 2]["phases_s"],
        "idle_phases_s": idle_runs[len(idle_runs) // 2]["phases_s"],
        "cold_phases_s": cold["phases_s"],
        "admitted": sum(r["admitted"] for r in busy_runs),
    }


def local_client() -> Client:
    """A test client this process's settings accept (allowed host; HTTPS, as production redirects to it)."""
    hosts = settings.ALLOWED_HOSTS
    host = "localhost" if "localhost" in hosts or "*" in hosts or not hosts else hosts[0].lstrip(".")
    return Client(HTTP_HOST=host)


# --- pages -----------------------------------------------------------------------------------------
def query_counts(*, admin, paths: dict[str, str]) -> dict[str, int]:
    """Queries each page makes, counted in this process with the test client (same database, same code)."""
    client = local_client()
    client.force_login(admin)
    counts = {}
    for name, path in paths.items():
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path, secure=True)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status_code}")
        counts[name] = len(captured)
    return counts


class Http:
    """Requests to the benchmark's server: pages with the admin's session cookie, the API with its token."""

    def __init__(self, base_url: str, *, session_id: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.session_id, self.token = session_id, token

    def session(self, *, with_cookie: bool = True) -> requests.Session:
        """Without the cookie for writes: DRF would authenticate the session first and then demand a CSRF token."""
        session = requests.Session()
        if with_cookie:
            session.cookies.set("sessionid", self.session_id)
        session.headers["Authorization"] = f"Token {self.token}"
        return session

    def get(self, session: requests.Session, path: str) -> tuple[float, int]:
        started = time.perf_counter()
        response = session.get(self.base_url + path, allow_redirects=False)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status_code}: {response.text[:300]}")
        return elapsed, len(response.content)


def pages_measure(http: Http, *, pages: dict[str, str], baseline_path: str, rounds: int, counts: dict[str, int]) -> dict:
    """Each round asks for the trivial endpoint, then every page, so both see the same load and caches."""
    session = http.session()
    for path in [baseline_path, *pages.values()]:
        http.get(session, path)  # warm each worker's code paths
    times: dict[str, list[float]] = {name: [] for name in pages}
    sizes: dict[str, int] = {}
    baseline: list[float] = []
    for _ in range(rounds):
        for name, path in pages.items():
            baseline.append(http.get(session, baseline_path)[0])
            elapsed, size = http.get(session, path)
            times[name].append(elapsed)
            sizes[name] = size
    results = {name: {**summary_ms(times[name]), "bytes": sizes[name], "queries": counts.get(name)} for name in pages}
    return {"pages": results, "baseline": summary_ms(baseline)}


# --- submit ----------------------------------------------------------------------------------------
def _clients_run(http: Http, *, clients: int, duration_s: float, request) -> tuple[float, list[float], int]:
    """`request(session)` in a loop from each client until the deadline: (seconds, latencies of successes, failures)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + duration_s

    def client():
        session = http.session(with_cookie=False)
        mine = []
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            ok = request(session)
            if ok:
                mine.append(time.perf_counter() - started)
            else:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, latencies, errors[0]


def submit_measure(http: Http, *, baseline_path: str, clients: int, duration_s: float, rounds: int = 2) -> dict:
    """`clients` threads for `duration_s` per round, the trivial GET and the submit POST alternating."""
    url = http.base_url
    figures = {"baseline": ([], 0.0, 0), "submit": ([], 0.0, 0)}

    def get(session):
        return session.get(url + baseline_path).status_code == 200

    def post(session):
        return session.post(url + "/api/v1/jobs/", json=SUBMIT_BODY).status_code == 201

    for _ in range(rounds):
        for name, request in (("baseline", get), ("submit", post)):
            elapsed, latencies, errors = _clients_run(http, clients=clients, duration_s=duration_s / rounds, request=request)
            done, seconds, failed = figures[name]
            figures[name] = (done + latencies, seconds + elapsed, failed + errors)
    out = {}
    for name, (latencies, seconds, failed) in figures.items():
        out[name] = {"rps": round(len(latencies) / seconds, 1), **summary_ms(latencies), "errors": failed}
    with CaptureQueriesContext(connection) as captured:
        _submit_once_in_process(http)
    out["submit"]["queries"] = len(captured)
    return out


def _submit_once_in_process(http: Http) -> None:
    client = local_client()
    response = client.post("/api/v1/jobs/", SUBMIT_BODY, content_type="application/json", secure=True, HTTP_AUTHORIZATION=f"Token {http.token}")
    if response.status_code != 201:
        raise RuntimeError(f"POST /api/v1/jobs/: HTTP {response.status_code}: {response.content[:300]!r}")
