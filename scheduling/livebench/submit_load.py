"""`bench submit-load`: concurrent submitters POST small gangs for a minute to gunicorn over this database while a
Celery worker and beat run reconcile passes (each submission asks for one, as in production). Each submitter is a
researcher of their own with their own token, as that many people would be, so the per-user rate limit applies as
it would to them. The same clients on a trivial endpoint, before and after, are the baseline. Reported: requests/s,
median and p95, errors, lost jobs (answered 201 but not stored, or stored more than once) and the invariants after."""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from scheduling.cluster.registry import get_cluster
from scheduling.livebench import server, world
from scheduling.livebench.measure import percentile
from scheduling.livebench.run import BASELINE_PATH
from scheduling.models import Job, ReconcileState
from scheduling.selectors.invariants import invariant_violations

JOB_PREFIX = "submit-load"


@dataclass
class Round:
    """One phase of every client in a loop: its latencies, failures and duration."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)

    def figures(self) -> dict:
        ms = sorted(s * 1000 for s in self.latencies)
        return {"requests": len(ms) + len(self.failures), "errors": len(self.failures),
                "rps": round(len(ms) / self.seconds, 1) if self.seconds else 0.0,
                "median_ms": round(statistics.median(ms), 1) if ms else None,
                "p95_ms": round(percentile(ms, 0.95), 1) if ms else None, "max_ms": round(ms[-1], 1) if ms else None}


@dataclass
class Client:
    session: requests.Session
    queue: str


def load_run(*, clients: int, seconds: float, baseline_s: float, workers: int, threads: int, port: int, log=print) -> dict:
    world.demo_world_seed()
    queues = world.researchers_create(clients)
    tokens = world.api_tokens(queues)
    passes_before = ReconcileState.objects.get(pk=1).passes
    logs = Path(tempfile.mkdtemp(prefix="gangway-submit-load-"))
    background = [server.celery_start("worker", log_path=str(logs / "worker.log")),
                  server.celery_start("beat", log_path=str(logs / "beat.log"))]
    # As compose and the manifests run it: persistent database connections, a pass asked for after each write.
    web = server.gunicorn_start(port=port, workers=workers, threads=threads, GANGWAY_RECONCILE_ON_WRITE="1",
                                DATABASE_CONN_MAX_AGE="60")
    base = f"http://127.0.0.1:{port}"
    try:
        sessions = [Client(_session(tokens[name]), queue) for name, queue in queues.items()]
        for client in sessions:
            client.session.get(base + BASELINE_PATH, timeout=60)  # connections open, each gunicorn worker warm
        log(f"{clients} submitters, each its own researcher; baseline GET {BASELINE_PATH} for {baseline_s / 2:g} s ...")
        before = _round(sessions, baseline_s / 2, lambda client: _get(client, base))
        log(f"submitting for {seconds:g} s with the pass loop running ...")
        submit = _round(sessions, seconds, lambda client: _post(client, base))
        log(f"baseline again for {baseline_s / 2:g} s ...")
        after = _round(sessions, baseline_s / 2, lambda client: _get(client, base))
    finally:
        for process in (web, *background):
            server.stop(process)
    stored = list(Job.objects.filter(name__startswith=JOB_PREFIX).values_list("id", flat=True))
    baseline = Round(seconds=before.seconds + after.seconds, latencies=before.latencies + after.latencies,
                     failures=before.failures + after.failures)
    violations = invariant_violations(cluster=get_cluster())
    return {
        "clients": clients,
        "seconds": seconds,
        "gunicorn_workers": workers,
        "gunicorn_threads": threads,
        "submit": submit.figures(),
        "baseline": {**baseline.figures(), "path": BASELINE_PATH},
        "lost_jobs": len(set(submit.job_ids) - set(stored)),
        "jobs_stored_not_answered": len(set(stored) - set(submit.job_ids)),
        "passes_during_run": ReconcileState.objects.get(pk=1).passes - passes_before,
        "failures": sorted(set(submit.failures + baseline.failures))[:10],
        "invariant_violations": violations,
        "logs": str(logs),
    }


def _session(token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return session


def _get(client: Client, base: str) -> str | None:
    response = client.session.get(base + BASELINE_PATH, timeout=60)
    return None if response.status_code == 200 else f"GET {response.status_code}: {response.text[:200]}"


def _post(client: Client, base: str) -> str | int:
    body = {"name": f"{JOB_PREFIX}-{client.queue}", "queue": client.queue, "flavor": "H100-80GB",
            "pod_sets": [{"name": "worker", "count": 1, "gpus_per_pod": 1}], "runtime_limit_s": 600}
    response = client.session.post(base + "/api/v1/jobs/", json=body, timeout=60)
    return response.json()["id"] if response.status_code == 201 else f"POST {response.status_code}: {response.text[:200]}"


def _round(clients: list[Client], seconds: float, request) -> Round:
    """Every client calls `request(client)` in a loop until the deadline: None or a job id is a success, a string a
    failure (an exception is one too)."""
    result = Round()
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def loop(client: Client) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                outcome = request(client)
            except requests.RequestException as error:
                outcome = f"{type(error).__name__}: {error}"
            elapsed = time.perf_counter() - started
            with lock:
                if isinstance(outcome, str):
                    result.failures.append(outcome)
                else:
                    result.latencies.append(elapsed)
                    if outcome is not None:
                        result.job_ids.append(outcome)

    started = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - started
    return result


def table(figures: dict) -> str:
    s, b = figures["submit"], figures["baseline"]
    lines = [
        f"bench submit-load: {figures['clients']} submitters (one researcher and token each) for {figures['seconds']:g} s, "
        f"gunicorn with {figures['gunicorn_workers']} workers × {figures['gunicorn_threads']} threads, a Celery worker (2 processes) and beat running passes",
        "",
        f"{'':<30}{'requests':>10}{'req/s':>9}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}{'errors':>8}",
        f"{'POST /api/v1/jobs/':<30}{s['requests']:>10}{s['rps']:>9}{s['median_ms']!s:>11}{s['p95_ms']!s:>9}{s['max_ms']!s:>9}{s['errors']:>8}",
        f"{'baseline GET ' + b['path']:<30}{b['requests']:>10}{b['rps']:>9}{b['median_ms']!s:>11}{b['p95_ms']!s:>9}{b['max_ms']!s:>9}{b['errors']:>8}",
        "",
        f"lost jobs (201 but not stored): {figures['lost_jobs']}; stored but never answered 201: {figures['jobs_stored_not_answered']}",
        f"reconcile passes during the run: {figures['passes_during_run']}",
        f"invariant violations after the load: {len(figures['invariant_violations'])}",
    ]
    lines += [f"  {v}" for v in figures["invariant_violations"][:10]]
    lines += [f"  failure: {f}" for f in figures["failures"]]
    lines.append(f"worker and beat logs: {figures['logs']}")
    return "\n".join(lines)
