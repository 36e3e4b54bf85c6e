"""Private Redis and PostgreSQL servers that fault tests stop and start: never the shared ones other runs use."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from scheduling.livebench.server import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


class PrivateRedis:
    """`redis-server` on a free port, nothing saved to disk; stop() and start() keep the port."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


class PrivatePostgres:
    """A PostgreSQL 15 cluster made by initdb in a temporary folder, on a free port; restart() stops and starts it."""

    def __init__(self) -> None:
        if not (PG_BIN / "initdb").exists():
            pytest.fail(f"fault tests need PostgreSQL's server binaries in {PG_BIN} for a private cluster")
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="gangway-pg-"))
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.directory, "postgres")
        self._run("initdb", "-D", str(self.directory / "data"), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-l", str(self.directory / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> None:
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-qc", f"CREATE DATABASE {name}"],
                       check=True, capture_output=True)

    def remove(self) -> None:
        subprocess.run(self._as_postgres(PG_BIN / "pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "stop"),
                       capture_output=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(self._as_postgres(PG_BIN / program, *args), check=True, capture_output=True, timeout=120)

    @staticmethod
    def _as_postgres(*argv) -> list[str]:
        command = [str(a) for a in argv]
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command
