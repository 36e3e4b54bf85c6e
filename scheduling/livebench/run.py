"""`bench live`: build the scale, then measure the pass, the pages and submit against their baselines."""

from __future__ import annotations

import base64
import logging
import time
from urllib.parse import urlencode

from django.conf import settings
from django.db import connection
from portal.accounts.services import api_token_create

from scheduling.livebench import build, measure
from scheduling.livebench import server as server_module
from scheduling.models import Job, QueueQuota

BASELINE_PATH = "/api/v1/teams/"
DEEP_OFFSET = 250_000


class NotFresh(Exception):
    """The database already holds jobs; the benchmark builds its own and refuses to wipe them unasked."""


def pages_of(built: build.Built) -> dict[str, str]:
    """Every page and list endpoint; "deep" is the page DEEP_OFFSET jobs down the list, reached by its keyset link."""
    deep_id, deep_at = Job.objects.order_by("-submitted_at", "-id").values_list("id", "submitted_at")[min(DEEP_OFFSET, built.jobs // 2)]
    api_cursor = base64.b64encode(urlencode({"p": str(deep_at)}).encode()).decode()  # DRF's cursor: the position
    queue, team, flavor = QueueQuota.objects.filter(queue__name=built.queue_names[0]).values_list(
        "queue__name", "queue__team__name", "flavor__name").first()
    return {
        "web_login": "/accounts/login/",
        "web_jobs": "/",
        "web_jobs_pending": "/?state=pending",
        "web_jobs_deep": f"/?older={deep_id}",
        "web_job_detail": f"/jobs/{built.pending_job_id}/",
        "web_submit_form": "/jobs/new/",
        "web_fleet": "/fleet/",
        "web_queues": "/queues/",
        "web_quota_form": f"/queues/{queue}/quotas/{flavor}/",
        "web_teams": "/teams/",
        "web_team": f"/teams/{team}/",
        "web_gaming": "/gaming/",
        "web_preemptions": "/preemptions/",
        "web_history": "/history/",
        "web_audit": "/audit/",
        "api_jobs": "/api/v1/jobs/",
        "api_jobs_pending": "/api/v1/jobs/?state=pending",
        "api_jobs_deep": f"/api/v1/jobs/?{urlencode({'cursor': api_cursor})}",
        "api_job_detail": f"/api/v1/jobs/{built.pending_job_id}/",
        "api_nodes": "/api/v1/nodes/",
        "api_fleet": "/api/v1/fleet/",
        "api_queues": "/api/v1/queues/",
        "api_preemptions": "/api/v1/preemptions/",
        "api_usage": "/api/v1/usage/",
    }


def run(*, scale: build.Scale, rounds: int, clients: int, submit_s: float, busy_passes: int, idle_passes: int,
        url: str | None, port: int, workers: int, wipe: bool, profile_dir: str | None, reuse: bool = False, log=print) -> dict:
    logging.getLogger("scheduling").setLevel(logging.WARNING)  # a pass logs every admitted id
    now = time.time()
    if reuse:
        try:
            built = build.scale_found(scale)
        except LookupError as error:
            raise NotFresh(str(error)) from error
        log(f"measuring the {built.jobs} jobs built before ({connection.vendor}) ...")
    else:
        if Job.objects.exists():
            if not wipe:
                raise NotFresh(f"database {connection.settings_dict['NAME']} holds jobs; pass --wipe to empty it first "
                               f"(or --reuse to measure what an earlier run built)")
            build.database_wipe()
        log(f"building {scale.pending} pending jobs on {scale.nodes} nodes ({connection.vendor}) ...")
        built = build.scale_build(scale, now=now)
        log(f"built {built.jobs} jobs in {built.seconds} s; measuring passes ...")
    passes = measure.passes_measure(submitter=built.admin, queue_names=built.queue_names, now=now, busy=busy_passes,
                                    idle=idle_passes, profile_dir=profile_dir)
    pages = pages_of(built)
    counts = measure.query_counts(admin=built.admin, paths={"baseline": BASELINE_PATH, **pages})
    client = measure.local_client()
    client.force_login(built.admin)
    http = measure.Http(url or f"http://127.0.0.1:{port}", session_id=client.cookies[settings.SESSION_COOKIE_NAME].value,
                        token=api_token_create(user=built.admin, name="bench live", expires_in_days=1)[1])
    # The per-user rate limit raised: the benchmark measures throughput, not the limiter (one user makes every request).
    server = None if url else server_module.gunicorn_start(port=port, workers=workers, GANGWAY_THROTTLE_USER="1000000/min")
    try:
        log("measuring pages ...")
        page_figures = measure.pages_measure(http, pages=pages, baseline_path=BASELINE_PATH, rounds=rounds, counts=counts)
        log("measuring submit ...")
        submit = measure.submit_measure(http, baseline_path=BASELINE_PATH, clients=clients, duration_s=submit_s)
    finally:
        if server is not None:
            server_module.stop(server)
    return {
        "pending": scale.pending,
        "database": connection.vendor,
        "scale": {"nodes": scale.nodes, "gpus_per_node": scale.gpus_per_node, "queues": scale.queues, "jobs": built.jobs,
                  "build_s": built.seconds},
        "pass": passes,
        "pages": page_figures["pages"],
        "baseline": {**page_figures["baseline"], "path": BASELINE_PATH, "queries": counts["baseline"],
                     "rps": submit["baseline"]["rps"], "rps_p95_ms": submit["baseline"]["p95_ms"]},
        "submit": {**submit["submit"], "clients": clients},
    }


def table(figures: dict) -> str:
    p = figures["pass"]
    lines = [
        f"bench live: {figures['pending']} pending, {figures['scale']['jobs']} jobs, {figures['scale']['nodes']} nodes "
        f"({figures['database']}; built in {figures['scale']['build_s']} s)",
        "",
        f"{'pass':<28}{'seconds':>10}",
        f"{'  busy (median)':<28}{p['median_s']:>10}",
        f"{'  floor: bare SELECTs':<28}{p['floor_s']:>10}",
        f"{'  core cycle':<28}{p['core_s']:>10}",
        f"{'  goal: 2×floor + core':<28}{round(2 * p['floor_s'] + p['core_s'], 3):>10}",
        f"{'  nothing to do':<28}{p['idle_s']:>10}   (after {p['settle_passes']} passes settled the busy ones)",
        f"{'  first (nothing explained)':<28}{p['first_s']:>10}",
        f"{'  cold (restarted worker)':<28}{p['cold_s']:>10}",
        f"  busy phases: {p['busy_phases_s']}",
        f"  idle phases: {p['idle_phases_s']}",
        f"  first phases: {p['first_phases_s']}",
        f"  cold phases: {p['cold_phases_s']}",
        "",
        f"{'page':<20}{'median ms':>10}{'p95 ms':>10}{'KB':>9}{'queries':>9}",
    ]
    b = figures["baseline"]
    lines.append(f"{'baseline ' + b['path']:<20}{b['median_ms']:>10}{b['p95_ms']:>10}{'':>9}{b['queries']:>9}")
    for name, page in figures["pages"].items():
        lines.append(f"{name:<20}{page['median_ms']:>10}{page['p95_ms']:>10}{page['bytes'] / 1024:>9.1f}{page['queries']:>9}")
    s = figures["submit"]
    lines += [
        "",
        f"{'submit, ' + str(s['clients']) + ' clients':<20}{'req/s':>10}{'p95 ms':>10}{'queries':>9}{'errors':>9}",
        f"{'  POST /api/v1/jobs/':<20}{s['rps']:>10}{s['p95_ms']:>10}{s['queries']:>9}{s['errors']:>9}",
        f"{'  baseline GET':<20}{b['rps']:>10}{b['rps_p95_ms']:>10}",
    ]
    return "\n".join(lines)
