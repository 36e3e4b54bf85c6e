"""The reconcile pass's memory between passes: the jobs and nodes its last snapshot read, refreshed from the rows
changed since (RowChange, written by database triggers), so a pass with nothing new reads no job row at all."""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from itertools import chain

from django.conf import settings
from django.db import connection

from scheduling.cluster.base import Cluster
from scheduling.core.model import Job, JobState, Snapshot
from scheduling.models import Explanation, Flavor, PriorityClass, RowChange
from scheduling.models import Job as JobRow
from scheduling.models import Node as NodeRow
from scheduling.models import Placement as PlacementRow
from scheduling.models import PodSet as PodSetRow
from scheduling.models.jobs import HOLDING_STATES
from scheduling.snapshots import (
    ID_CHUNK,
    JOB_FIELDS,
    SnapshotContext,
    holding_rows,
    jobs_from_rows,
    pending_window_rows,
    queue_rows,
    queues_load,
    snapshot_assemble,
)

KEEP_PASSES = 500
"""Changes stay in the log this many passes; a process whose last pass is older reads everything again."""
LOGGED_TABLES = (JobRow, PodSetRow, PlacementRow, NodeRow)
"""Tables whose triggers write the log (migration 0009, PostgreSQL and SQLite); without them every pass reads in full."""
PENDING = JobState.PENDING.value


@dataclass
class _Window:
    """One queue's pending jobs as the snapshot holds them, in index order; `is_whole` when that is all of them,
    otherwise the first GANGWAY_PENDING_PER_QUEUE."""

    keys: list[tuple] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    is_whole: bool = True


@dataclass
class StoredExplanations:
    """What the database holds, as far as this process knows: each pending job's explanation key, and each
    explanation row's fingerprint (services.explanations keeps both current as it writes)."""

    keys: dict[int, str] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    pruned_at: float | None = None


@dataclass
class CachedSnapshot:
    snapshot: Snapshot
    context: SnapshotContext
    is_changed: bool
    """Anything the explanations depend on may differ from the previous pass of this process (rows, nodes, queues,
    plans, settings); False when the pass sees exactly what the previous one saw, but later."""
    pass_number: int
    partial_queue_ids: list[int] = field(default_factory=list)
    """Queues with more pending jobs than the snapshot holds of them (GANGWAY_PENDING_PER_QUEUE)."""
    is_fleet_changed: bool = True
    """The nodes or the jobs holding GPUs (their placements) may differ from the previous pass's."""


class SnapshotCache:
    """Per process. `snapshot()` runs inside the pass's transaction, after the row lock and after observing the
    cluster (whose writes it must see); `committed()` runs once that transaction has committed. Until then the cache
    counts as stale, so a pass that fails leaves the next one to read everything."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held for a whole pass, explanations included: one pass at a time uses this process's cache."""
        self.clear()

    def clear(self) -> None:
        self.pass_number: int | None = None
        """Every change stamped with this pass number or a lower one is in the cache."""
        self.per_queue_cap: int | None = None
        self.names: tuple | None = None
        self.windows: dict[int, _Window] = {}
        self.queued: dict[int, tuple[int, tuple]] = {}
        """Pending job id → (its queue's id, its order key in that queue's window)."""
        self.admitted: dict[int, Job] = {}
        self.context = SnapshotContext()
        self.stored = StoredExplanations()
        self.explanations_version: int | None = None
        self.explained_at: float | None = None
        self.nodes: tuple | None = None
        self.last: tuple | None = None
        self.is_logged = False

    # --- one pass ---------------------------------------------------------------------------------
    def snapshot(self, *, now: float, cluster: Cluster, passes: int, explanations_version: int) -> CachedSnapshot:
        """The snapshot of pass number `passes + 1`: rows changed since this process's last pass read again, the
        rest as remembered. Equal to `snapshots.snapshot_build` at the same moment."""
        number = passes + 1
        previous, self.pass_number = self.pass_number, None
        if previous is None:
            self.is_logged = change_log_installed()
        is_logged = self.is_logged
        if is_logged:
            # Stamped before anything is read: a change committed after this statement waits for the next pass.
            RowChange.objects.filter(pass_number__isnull=True).update(pass_number=number)
            RowChange.objects.filter(pass_number__lte=number - KEEP_PASSES).delete()
        rows = queue_rows()
        queue_ids = [row.pk for row in rows]
        names = (
            tuple((row.pk, row.name, row.team.name) for row in rows),
            tuple(Flavor.objects.order_by("pk").values_list("pk", "name")),
            tuple(PriorityClass.objects.order_by("pk").values_list("pk", "name")),
        )
        cap = settings.GANGWAY_PENDING_PER_QUEUE
        is_whole_read = (
            not is_logged or previous is None or not number - KEEP_PASSES <= previous < number
            or cap != self.per_queue_cap or names != self.names
        )
        if is_whole_read:
            self._read_everything(queue_ids, cap)
            self.names, self.per_queue_cap = names, cap
            job_ids, nodes_changed, holding_changed = set(), True, True
        else:
            changes = RowChange.objects.filter(pass_number__gt=previous, pass_number__lte=number).values_list("kind", "row_id")
            job_ids = set()
            nodes_changed = False
            for kind, row_id in changes:
                if kind == "job":
                    job_ids.add(row_id)
                else:
                    nodes_changed = True
            holding_changed = self._read_jobs(job_ids, queue_ids, cap)
        if is_whole_read or explanations_version != self.explanations_version:
            # Another process wrote explanations since this one last did: what it remembers may be out of date.
            if not is_whole_read:
                stored = JobRow.objects.filter(state=PENDING).values_list("id", "explanation_key")
                self.stored.keys = {job_id: key for job_id, key in stored if job_id in self.queued}
            self.stored.fingerprints = dict(Explanation.objects.values_list("key", "fingerprint"))
        self.explanations_version = explanations_version
        if nodes_changed or self.nodes is None or not getattr(cluster, "lists_node_rows", False):
            self.nodes = tuple(cluster.list_nodes())
        context = SnapshotContext(pod_set_ids=self.context.pod_set_ids, versions=self.context.versions)
        snapshot = snapshot_assemble(
            now=now, nodes=self.nodes, queues=queues_load(rows), context=context,
            admitted=tuple(self.admitted[job_id] for job_id in sorted(self.admitted)),
            pending=tuple(chain.from_iterable(self.windows[queue_id].jobs for queue_id in queue_ids)),
        )
        snapshot, is_changed = self._keep_fixed_parts(snapshot, is_whole_read or bool(job_ids) or nodes_changed)
        return CachedSnapshot(snapshot=snapshot, context=context, is_changed=is_changed, pass_number=number,
                              partial_queue_ids=[queue_id for queue_id in queue_ids if not self.windows[queue_id].is_whole],
                              is_fleet_changed=nodes_changed or holding_changed)

    def committed(self, pass_number: int) -> None:
        self.pass_number = pass_number

    def _keep_fixed_parts(self, snapshot: Snapshot, rows_changed: bool) -> tuple[Snapshot, bool]:
        """The previous snapshot's queue mapping when equal (the same object lets the core keep its fleet state and
        quota ledger between cycles), and whether anything but the time and usage history differs."""
        # A plan awaiting approval counts by what it proposes: its fingerprint of the state it was made on is the
        # core's own bookkeeping, and the persist step stores it again when the core plans again.
        awaiting = {job_id: (planned.plan, planned.needs_approval) for job_id, planned in snapshot.awaiting_plans.items()}
        idle = frozenset((job.id, job.idle_since) for job in snapshot.admitted if job.idle_since is not None)
        fixed = (snapshot.topology, snapshot.nodes, snapshot.queues, snapshot.approved_preemptions,
                 snapshot.priority_class_caps, awaiting, snapshot.config, idle)
        if self.last is not None and fixed[2] == self.last[2]:
            fixed = (*fixed[:2], self.last[2], *fixed[3:])
            snapshot = replace(snapshot, queues=self.last[2])
        is_changed = rows_changed or self.last is None or fixed != self.last
        self.last = fixed
        return snapshot, is_changed

    # --- reading rows -------------------------------------------------------------------------------
    def _read_everything(self, queue_ids: list[int], cap: int) -> None:
        self.windows, self.queued, self.admitted = {}, {}, {}
        self.context = SnapshotContext()
        holding = holding_rows()
        for job in jobs_from_rows(holding, self.context):
            self.admitted[job.id] = job
        windows = {queue_id: pending_window_rows(queue_id, cap) for queue_id in queue_ids}
        rows = [row for queue_id in queue_ids for row in windows[queue_id]]
        self.stored.keys = {row["id"]: row["explanation_key"] for row in rows}
        pending = jobs_from_rows(rows, self.context)
        position = 0
        for queue_id in queue_ids:
            count = len(windows[queue_id])
            self._window_set(queue_id, pending[position : position + count], is_whole=count < cap)
            position += count

    def _window_set(self, queue_id: int, jobs: list[Job], *, is_whole: bool) -> None:
        window = self.windows[queue_id] = _Window(keys=[job.queue_order for job in jobs], jobs=list(jobs), is_whole=is_whole)
        for job, key in zip(jobs, window.keys):
            self.queued[job.id] = (queue_id, key)

    def _read_jobs(self, job_ids: set[int], queue_ids: list[int], cap: int) -> bool:
        """Forget the changed jobs, then remember them as they are now (if they are still pending or holding GPUs);
        whether any of them held GPUs before or holds them now."""
        for queue_id in self.windows.keys() - set(queue_ids):
            for job in list(self.windows[queue_id].jobs):
                self._forget(job.id)
            del self.windows[queue_id]
        for queue_id in queue_ids:
            self.windows.setdefault(queue_id, _Window())  # a queue created since: its jobs all come through the log
        ordered = sorted(job_ids)
        rows = []
        for start in range(0, len(ordered), ID_CHUNK):
            rows.extend(JobRow.objects.filter(pk__in=ordered[start : start + ID_CHUNK], state__in=[PENDING, *HOLDING_STATES])
                        .values(*JOB_FIELDS))
        holding_changed = any(job_id in self.admitted for job_id in ordered)
        shrunk = set()
        for job_id in ordered:
            queue_id = self._forget(job_id)
            if queue_id is not None and not self.windows[queue_id].is_whole:
                shrunk.add(queue_id)
        for row, job in zip(rows, jobs_from_rows(rows, self.context)):
            if job.state is not JobState.PENDING:
                self.admitted[job.id] = job
                holding_changed = True
            elif self._insert(job, row["queue_id"], cap):
                self.stored.keys[job.id] = row["explanation_key"]
            else:
                self._drop_context(job)  # behind a window that is not whole: outside the snapshot, as in a whole read
        for queue_id in shrunk:
            # More pending than the window holds, and some of the window left: read the window again, so it is the
            # first GANGWAY_PENDING_PER_QUEUE jobs as a whole read would give.
            for job in list(self.windows[queue_id].jobs):
                self._forget(job.id)
            window_rows = pending_window_rows(queue_id, cap)
            self._window_set(queue_id, jobs_from_rows(window_rows, self.context), is_whole=len(window_rows) < cap)
            self.stored.keys.update((row["id"], row["explanation_key"]) for row in window_rows)
        return holding_changed

    def _insert(self, job: Job, queue_id: int, cap: int) -> bool:
        """Put a pending job in its queue's window; False if it falls behind the window's first `cap` jobs."""
        window = self.windows[queue_id]
        key = job.queue_order
        if not window.is_whole and (not window.keys or key > window.keys[-1]):
            return False
        index = bisect_left(window.keys, key)
        window.keys.insert(index, key)
        window.jobs.insert(index, job)
        self.queued[job.id] = (queue_id, key)
        while len(window.jobs) > cap:
            window.is_whole = False
            self._forget(window.jobs[-1].id)
        return job.id in self.queued  # not when it was the one past the cap

    def _forget(self, job_id: int) -> int | None:
        """Drop a job from the cache; the id of the queue whose window held it, if one did."""
        job = self.admitted.pop(job_id, None)
        queue_id = None
        if job is None and job_id in self.queued:
            queue_id, key = self.queued.pop(job_id)
            window = self.windows[queue_id]
            index = bisect_left(window.keys, key)
            job = window.jobs.pop(index)
            del window.keys[index]
            self.stored.keys.pop(job_id, None)
        if job is not None:
            self._drop_context(job)
        return queue_id

    def _drop_context(self, job: Job) -> None:
        self.context.versions.pop(job.id, None)
        for pod_set in job.pod_sets:
            self.context.pod_set_ids.pop((job.id, pod_set.name), None)


def change_log_installed() -> bool:
    """Whether every trigger that writes RowChange is in place (a table rebuilt by a later migration on SQLite would
    lose its triggers: then the cache reads in full rather than miss changes)."""
    tables = [model._meta.db_table for model in LOGGED_TABLES]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgname = ANY(%s)",
                           [[f"{table}_log_change" for table in tables]])
            return cursor.fetchone()[0] == len(tables)
        if connection.vendor == "sqlite":
            names = [f"{table}_log_{event}" for table in tables for event in ("insert", "delete", "update")]
            cursor.execute(f"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ({', '.join(['%s'] * len(names))})",
                           names)
            return cursor.fetchone()[0] == len(names)
    return False


PASS_CACHE = SnapshotCache()
"""The reconcile pass's cache in this process."""
