"""The reconcile lock on Redis is a lease: renewed while its holder lives, gone seconds after it is killed; and
`reconcile --once` takes it like the task does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from scheduling.tasks import LOCK_KEY, reconcile_lock
from tests.integration.test_crash_and_concurrency import ROOT, database_url

pytestmark = pytest.mark.integration


def test_a_live_holder_keeps_the_lease_beyond_its_length(services_are_real, settings):
    settings.GANGWAY_RECONCILE_LOCK_LEASE_S = 1
    with reconcile_lock() as acquired:
        assert acquired
        time.sleep(2.5)  # more than two leases: only the heartbeat keeps it
        with reconcile_lock() as second:
            assert not second, "still held"
    assert not services_are_real.exists(LOCK_KEY), "released on exit"


def test_a_holder_killed_mid_pass_frees_the_lock_within_one_lease(services_are_real, transactional_db):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import django; django.setup(); import time; from scheduling.tasks import reconcile_lock\n"
                               "with reconcile_lock() as held:\n    print(held, flush=True); time.sleep(600)"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": database_url(), "GANGWAY_RECONCILE_LOCK_LEASE_S": "3"},
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        ttl_ms = services_are_real.pttl(LOCK_KEY)
        assert 0 < ttl_ms <= 3000, "the lock a dead holder leaves expires within one lease"
    finally:
        if holder.poll() is None:
            holder.kill()


def test_reconcile_once_skips_while_another_pass_holds_the_lock(services_are_real, transactional_db, org):
    env = {**os.environ, "DATABASE_URL": database_url()}
    with reconcile_lock() as acquired:
        assert acquired
        skipped = subprocess.run([sys.executable, "manage.py", "reconcile", "--once"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=120)
    ran = subprocess.run([sys.executable, "manage.py", "reconcile", "--once"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)

    assert "skipped: another reconcile pass holds the lock" in skipped.stdout, skipped.stderr
    assert "job(s) left pending" in ran.stdout, ran.stderr
