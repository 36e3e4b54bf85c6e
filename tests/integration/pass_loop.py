"""A live reconcile pass loop in a thread of the test, on its own database connection: what a person's action races."""

from __future__ import annotations

import contextlib
import random
import threading
import time

from django.db import connections

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.services import reconcile_pass_run


class SnapshotThenWait(SimulatedCluster):
    """Reading the nodes (between the snapshot of pending jobs and the persist step) takes a few milliseconds,
    the window in which a person's change commits while the pass still works from what it read before."""

    lists_node_rows = False  # list_nodes is this test's hook: the pass must call it every time

    def list_nodes(self):
        time.sleep(random.uniform(0.005, 0.03))
        return super().list_nodes()


@contextlib.contextmanager
def live_pass_loop():
    """Passes back to back until the block ends; yields the list of their results. A pass that raised fails the
    block (after the loop has stopped)."""
    stop = threading.Event()
    results: list = []
    errors: list[BaseException] = []

    def loop():
        cluster = SnapshotThenWait()
        try:
            while not stop.is_set():
                results.append(reconcile_pass_run(cluster=cluster))
        except BaseException as error:  # noqa: BLE001 - surfaced below
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=loop, name="pass loop")
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
    assert results, "the loop ran at least one pass"
