"""The README's first command starts the demo and serves the login page."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dev_demo_migrates_seeds_and_serves_the_login_page(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE",
                                                             "DEBUG", "SECRET_KEY", "GANGWAY_DEMO")}
    env.update(GANGWAY_VAR_DIR=str(tmp_path / "var"), STATIC_ROOT=str(tmp_path / "static"), PORT=str(port),
               GANGWAY_VENV=sys.prefix, GANGWAY_SKIP_INSTALL="1", PYTHONUNBUFFERED="1")
    log = open(tmp_path / "demo.log", "w")
    process = subprocess.Popen([str(ROOT / "dev"), "demo"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        body = ""
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as response:
                    body = response.read().decode()
                    break
            except OSError:
                time.sleep(1)
        assert "Log in to Gangway" in body, (tmp_path / "demo.log").read_text()[-3000:]
        assert "Demo logins" in body, "the demo sets DEBUG, a development key and GANGWAY_DEMO itself"
        output = (tmp_path / "demo.log").read_text()
        assert f"http://127.0.0.1:{port}/" in output and "vision-researcher" in output
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
