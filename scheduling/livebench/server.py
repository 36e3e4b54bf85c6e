"""gunicorn, a Celery worker and beat as production runs them (DEBUG off), over this process's database, for the live
benchmarks and the API fuzz."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import requests
from django.conf import settings
from django.db import connection


def database_url() -> str:
    """This process's database (the test database inside a test run) as a URL another process can use."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _environment(env: dict[str, str]) -> dict[str, str]:
    # Same SECRET_KEY as this process: a session it logged in carries a hash keyed by it.
    # Plain HTTP on localhost: no redirect to HTTPS, cookies sent without TLS.
    return {**os.environ, "DEBUG": "0", "SECRET_KEY": settings.SECRET_KEY, "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0", "SECURE_COOKIES": "0", "DJANGO_SETTINGS_MODULE": "portal.settings",
            "DATABASE_URL": database_url(), **env}


def gunicorn_start(*, port: int, workers: int, threads: int = 1, **env: str) -> subprocess.Popen:
    """gunicorn over this process's database, DEBUG off, answering on 127.0.0.1:`port`; `env` adds settings."""
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--workers", str(workers), "--threads", str(threads),
         "--bind", f"127.0.0.1:{port}", "--timeout", "120", "--log-level", "warning"],
        cwd=str(settings.BASE_DIR), env=_environment(env), stdout=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30).status_code == 200:
                return server
        except requests.RequestException:
            if server.poll() is not None:
                break
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"gunicorn did not answer on port {port} within 120 s")


def celery_start(role: str, *, log_path: str, **env: str) -> subprocess.Popen:
    """`celery -A portal worker` (as compose runs it: two processes) or `celery -A portal beat` over this database."""
    options = ["--concurrency=2"] if role == "worker" else ["--schedule", f"{log_path}.schedule"]
    with open(log_path, "w") as log:
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "portal", role, "--loglevel=WARNING", *options],
                                cwd=str(settings.BASE_DIR), env=_environment(env), stdout=log, stderr=subprocess.STDOUT)


def stop(server: subprocess.Popen) -> None:
    """Stop a process this module started (TERM, then KILL after 30 s)."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
