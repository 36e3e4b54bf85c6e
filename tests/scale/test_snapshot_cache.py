"""The pass's cache: after any writes, the snapshot it assembles from remembered rows and logged changes equals one
read from scratch; a pass with nothing new reads no job row and explains nothing; the pending GPUs it records per
queue are those of the pending jobs."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.core.model import JobState
from scheduling.models import Explanation, Job, Node, PodSet, QueueUsage, ReconcileState
from scheduling.services import reconcile_pass_run, job_cancel, job_submit, node_cordon
from scheduling.snapshot_cache import PASS_CACHE, SnapshotCache
from scheduling.snapshots import snapshot_build
from tests.conftest import H100, stored_explanation

pytestmark = pytest.mark.django_db
T0 = 1_800_000_000.0


def submit(org, *, queue="vision-main", priority=None, gpus=8, at=T0):
    user = org["admin"] if priority is not None else org[f"{queue.split('-')[0]}-researcher"]
    return job_submit(user=user, queue_name=queue, flavor_name=H100, name="j", priority=priority,
                      pod_sets=[{"name": "w", "count": max(1, gpus // 8), "gpus_per_pod": min(gpus, 8)}], runtime_limit_s=600, now=at)


def assert_cache_agrees(cache: SnapshotCache, now: float = T0 + 100) -> bool:
    """One cached snapshot (as a pass takes it) against one read from scratch in the same transaction; True when
    the cache read everything."""
    with transaction.atomic():
        state, _ = ReconcileState.objects.select_for_update().get_or_create(pk=1)
        cached = cache.snapshot(now=now, cluster=SimulatedCluster(), passes=state.passes,
                                explanations_version=state.explanations_version)
        fresh, context = snapshot_build(now=now, cluster=SimulatedCluster())
        ReconcileState.objects.filter(pk=1).update(passes=F("passes") + 1)
    cache.committed(cached.pass_number)
    got = cached.snapshot
    assert [j.id for j in got.pending] == [j.id for j in fresh.pending]
    assert got.pending == fresh.pending
    assert got.admitted == fresh.admitted
    assert (got.nodes, got.queues, got.topology) == (fresh.nodes, fresh.queues, fresh.topology)
    assert (cached.context.versions, cached.context.pod_set_ids) == (context.versions, context.pod_set_ids)
    assert cache.stored.keys == dict(Job.objects.filter(pk__in=[j.id for j in fresh.pending]).values_list("id", "explanation_key"))
    return cached.is_changed


def test_every_kind_of_write_between_passes_reaches_the_cached_snapshot(org, settings):
    settings.GANGWAY_PENDING_PER_QUEUE = 3  # windows that are not whole: the cache must re-read them
    cache = SnapshotCache()
    jobs = [submit(org, at=T0 + i, priority=i % 3) for i in range(6)] + [submit(org, queue="language-main", at=T0 + 9)]
    assert_cache_agrees(cache)
    reconcile_pass_run(now=T0 + 10)  # some admitted, placed, released: the pass's own writes
    assert_cache_agrees(cache)
    steps = [
        lambda: submit(org, at=T0 + 20, priority=5),  # a new head of a full window
        lambda: submit(org, at=T0 + 21, priority=-5),  # behind a full window: not in the snapshot
        lambda: job_cancel(user=org["admin"], job_id=Job.objects.filter(state="pending").order_by("pk").first().pk),
        lambda: job_cancel(user=org["admin"], job_id=Job.objects.filter(state__in=["admitted", "running"]).order_by("pk").first().pk),
        lambda: Job.objects.filter(pk=jobs[-1].pk).update(priority=50),  # any write path, even an admin's raw update
        lambda: PodSet.objects.filter(job=jobs[-1]).update(count=2),
        lambda: node_cordon(actor=org["admin"], node_name=Node.objects.order_by("name").first().name, is_cordoned=True),
        lambda: Node.objects.filter(name=Node.objects.order_by("name").last().name).update(allocatable_gpus=4),
        lambda: reconcile_pass_run(now=T0 + 30),
        lambda: Job.objects.filter(state="pending").update(state=JobState.CANCELLED.value),
    ]
    for step in steps:
        step()
        assert assert_cache_agrees(cache)


def test_a_pass_with_nothing_new_reads_no_job_row_and_writes_nothing(org):
    for i in range(5):
        submit(org, at=T0 + i, gpus=8)
    submit(org, at=T0 + 9, gpus=64)  # never fits: stays pending with an explanation
    reconcile_pass_run(now=T0 + 10)
    reconcile_pass_run(now=T0 + 11)
    with CaptureQueriesContext(connection) as queries:
        result = reconcile_pass_run(now=T0 + 12)
    job_reads = [q["sql"] for q in queries.captured_queries
                 if q["sql"].startswith("SELECT") and "explanation_key" in q["sql"] or "scheduling_podset" in q["sql"]]
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE \"scheduling_job\"")]
    assert (job_reads, writes, result.admitted) == ([], [], [])
    assert "explain" not in result.phases_s


def test_nothing_new_is_explained_again_after_the_refresh_interval(org, settings):
    settings.GANGWAY_EXPLAIN_REFRESH_S = 60
    submit(org, at=T0, gpus=64)
    submit(org, at=T0, gpus=64)  # waits for the first
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)  # the first runs
    assert "explain" not in reconcile_pass_run(now=T0 + 30).phases_s
    assert "explain" in reconcile_pass_run(now=T0 + 62).phases_s


def test_explanations_written_elsewhere_make_the_pass_read_the_stored_fingerprints_again(org):
    submit(org, at=T0, gpus=64)
    job = submit(org, at=T0, gpus=64)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    stored = stored_explanation(job)
    Explanation.objects.all().delete()  # another writer...
    Job.objects.filter(pk=job.pk).update(explanation_key="")
    ReconcileState.objects.filter(pk=1).update(explanations_version=F("explanations_version") + 1)  # ...says so
    reconcile_pass_run(now=T0 + 70)
    assert stored_explanation(job)["summary"] == stored["summary"]


def test_a_pass_that_fails_leaves_the_next_one_to_read_everything(org, monkeypatch):
    submit(org, at=T0)
    reconcile_pass_run(now=T0 + 1)
    assert PASS_CACHE.pass_number is not None

    def broken(*args, **kwargs):
        raise RuntimeError("the core failed")

    monkeypatch.setattr("scheduling.services.reconcile.run_admission_cycle", broken)
    with pytest.raises(RuntimeError):
        reconcile_pass_run(now=T0 + 2)
    assert PASS_CACHE.pass_number is None


def pending_gpus_counted() -> dict:
    totals: dict = {}
    for queue, flavor, gpus in Job.objects.filter(state="pending").values_list("queue__name", "flavor__name", "gpus"):
        totals.setdefault(queue, {}).setdefault(flavor, 0)
        totals[queue][flavor] += gpus
    return totals


def pending_gpus_stored() -> dict:
    return {queue: gpus for queue, gpus in QueueUsage.objects.values_list("queue__name", "pending_gpus") if gpus}


operations = st.lists(st.tuples(st.sampled_from(["submit", "cancel", "priority", "pass", "cordon"]),
                                st.integers(min_value=0, max_value=20)), min_size=1, max_size=12)


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_any_sequence_of_writes_and_passes_keeps_the_cache_equal_to_a_read_from_scratch(org, settings, steps):
    settings.GANGWAY_PENDING_PER_QUEUE = 4
    cache = SnapshotCache()
    assert_cache_agrees(cache)
    for clock, (operation, n) in enumerate(steps):
        now = T0 + 1000 + clock
        if operation == "submit":
            submit(org, queue=("vision-main", "language-main")[n % 2], priority=n % 4 - 1, gpus=(1, 2, 8, 16)[n % 4], at=now)
        elif operation == "cancel":
            live = list(Job.objects.exclude(state__in=["succeeded", "failed", "cancelled"]).values_list("pk", flat=True))
            if live:
                job_cancel(user=org["admin"], job_id=live[n % len(live)])
        elif operation == "priority":
            Job.objects.filter(state="pending", pk__gte=n).update(priority=F("priority") + 1)
        elif operation == "pass":
            reconcile_pass_run(now=now)
            assert pending_gpus_counted() == pending_gpus_stored()
        else:
            names = list(Node.objects.order_by("name").values_list("name", flat=True))
            node_cordon(actor=org["admin"], node_name=names[n % len(names)], is_cordoned=bool(n % 2))
        assert_cache_agrees(cache, now=now)
