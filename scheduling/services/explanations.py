"""Explanations of pending jobs (Explanation rows, one per distinct answer) and their start estimates, and quota what-if previews (saved nowhere)."""

from __future__ import annotations

import hashlib
import json
import re
import time
import operator
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Iterable

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from scheduling import clock
from scheduling.cluster.base import Cluster
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending, iso
from scheduling.core.model import CycleResult, Job as CoreJob, JobState, Queue, Quota, Snapshot
from scheduling.models import Explanation, Job, Team
from scheduling.models import Queue as QueueRow
from scheduling.permissions import is_admin
from scheduling.services.common import Errors, to_datetime
from scheduling.services.org import _clean_allotments
from scheduling.services.queues import UNSET, queue_change_check
from scheduling.planning.forecast import forecast
from scheduling.planning.what_if import what_if
from scheduling.snapshot_cache import StoredExplanations
from scheduling.snapshots import snapshot_build

WRITE_CHUNK = 2000


def explanations_refresh(*, snapshot: Snapshot, decisions: CycleResult, now: float, stored: StoredExplanations) -> int:
    """Store why every pending job the pass considered waits; returns how many rows were written.

    Computed once per distinct shape and stored once per distinct answer (Explanation): jobs of one shape share a
    row, so an answer that changes for 100,000 jobs (the fleet's free GPUs moved) rewrites a few hundred rows. A row
    is written only when its fingerprint (the explanation without what grows with time alone, such as a fix's
    GPU-hours) differs from the one `stored` remembers, a job row only when its key does; `stored` (the pass's
    cache) is kept current. Rows no pending job refers to are deleted every GANGWAY_EXPLAIN_REFRESH_S.
    """
    explained = explain_pending(snapshot, decisions)
    keys = explanation_keys(snapshot.pending, explained.by_job)
    answers: dict[str, tuple[dict, str]] = {}
    by_object: dict[int, tuple[dict, str]] = {}
    for job_id, key in keys.items():
        if key not in answers:
            explanation = explained.by_job[job_id]
            answer = by_object.get(id(explanation))
            if answer is None:
                data = explanation.to_dict()
                answer = by_object[id(explanation)] = (data, explanation_fingerprint(data))
            answers[key] = answer
    moment = to_datetime(now)
    rows = [Explanation(key=key, data=data, fingerprint=fingerprint, checked_at=moment)
            for key, (data, fingerprint) in answers.items() if stored.fingerprints.get(key) != fingerprint]
    moved: dict[str, list[int]] = defaultdict(list)
    for job_id, key in keys.items():
        if stored.keys.get(job_id) != key:
            moved[key].append(job_id)
    is_prune_due = stored.pruned_at is None or now - stored.pruned_at >= settings.GANGWAY_EXPLAIN_REFRESH_S
    pruned = 0
    with transaction.atomic():
        Explanation.objects.bulk_create(rows, batch_size=500, update_conflicts=True, unique_fields=["key"],
                                        update_fields=["data", "fingerprint", "checked_at"])
        for key, job_ids in moved.items():
            for start in range(0, len(job_ids), WRITE_CHUNK):
                Job.objects.filter(pk__in=job_ids[start : start + WRITE_CHUNK], state=JobState.PENDING.value).update(explanation_key=key)
        if is_prune_due:
            referred = Job.objects.filter(state=JobState.PENDING.value).exclude(explanation_key="").values("explanation_key")
            pruned, _ = Explanation.objects.exclude(key__in=referred).delete()
    stored.fingerprints.update((row.key, row.fingerprint) for row in rows)
    stored.keys.update(keys)
    if is_prune_due:
        stored.pruned_at = now
        if pruned:
            stored.fingerprints = dict(Explanation.objects.values_list("key", "fingerprint"))
    return len(rows) + sum(map(len, moved.values())) + pruned


def explanation_keys(pending: Iterable[CoreJob], by_job: dict[int, object]) -> dict[int, str]:
    """Job id → the key of its explanation row: its shape's ("s:" + a hash of queue, flavor, pod sets, topology,
    tolerations and priority) when it got the answer most jobs of its shape got, its own ("j:" + id) otherwise
    (its queue's head, a job in backoff, one with a note of its own). Over 100,000 jobs, hence the C-level maps."""
    jobs = [job for job in pending if job.id in by_job]
    ids = [job.id for job in jobs]
    shapes = list(map(_shape, jobs))
    answers = list(map(id, map(by_job.__getitem__, ids)))
    common: dict[tuple, tuple[int, int]] = {}
    for (shape, answer), count in Counter(zip(shapes, answers)).items():
        if count > common.get(shape, (0, 0))[1]:
            common[shape] = (answer, count)
    shape_keys = {shape: ("s:" + hashlib.sha1(repr(shape).encode()).hexdigest()[:24], answer) for shape, (answer, _) in common.items()}
    keys = {}
    for job_id, shape, answer in zip(ids, shapes, answers):
        key, shared = shape_keys[shape]
        keys[job_id] = key if answer == shared else f"j:{job_id}"
    return keys


_shape = operator.attrgetter("queue", "flavor", "pod_sets", "topology", "tolerations", "priority")


def estimates_refresh(*, now: float | None = None, cluster: Cluster | None = None) -> dict:
    """Run the core forward from the current state and store each pending job's estimated start."""
    if cluster is None:
        from scheduling.cluster.registry import RecordedNodes

        cluster = RecordedNodes()
    now = clock.moment(now)
    snapshot, _ = snapshot_build(now=now, cluster=cluster)
    waiting = list(run_admission_cycle(snapshot).pending.by_job())
    started = time.perf_counter()
    result = forecast(snapshot, horizon_s=settings.GANGWAY_ESTIMATE_HORIZON_S)
    estimates = {job_id: result.starts.get(job_id) for job_id in waiting}
    moment = to_datetime(now)
    Job.objects.bulk_update(
        [Job(pk=job_id, estimated_start=None if start is None else to_datetime(start), estimated_at=moment)
         for job_id, start in estimates.items()],
        ["estimated_start", "estimated_at"], batch_size=1000,
    )
    return {
        "jobs": len(estimates),
        "within_horizon": sum(1 for v in estimates.values() if v is not None),
        "written": len(estimates),
        "forecast_s": round(time.perf_counter() - started, 3),
        "cycles": result.cycles,
    }


GPU_HOURS = re.compile(r"\d+(\.\d+)? GPU-h")


def explanation_fingerprint(data: dict) -> str:
    """Changes when the explanation says something new, not when only the time since a victim started does."""
    stable = {**data, "fixes": [_without_gpu_hours(fix) for fix in data["fixes"]]}
    text = GPU_HOURS.sub("GPU-h", json.dumps(stable, sort_keys=True))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _without_gpu_hours(fix: dict) -> dict:
    """A fix without the GPU-hours that grow while its victims run (its cost, and each victim's)."""
    return {key: [_without_gpu_hours(victim) for victim in value] if key == "victims" else value
            for key, value in fix.items() if not key.endswith("_gpu_hours")}


# --- what-if previews: computed on the current state, nothing saved -------------------------------------------


def queue_quota_preview(
    *, actor, queue_name: str, cohort_name=UNSET, weight=UNSET, strategy=UNSET, preemption_policy=UNSET,
    quotas: dict | None = None, now: float | None = None, cluster: Cluster | None = None,
) -> dict:
    """What `queue_update` with these arguments would do to waits: per team before vs after, the queue's pending jobs'
    estimated starts, and the running jobs of other teams that would become reclaimable. Same permissions and
    validation as `queue_update`; nothing is written."""
    _, clean = queue_change_check(
        actor=actor, queue_name=queue_name, action="previews changes to its queues", lock=False, cohort_name=cohort_name,
        weight=weight, strategy=strategy, preemption_policy=preemption_policy, quotas=quotas,
    )

    def change(current: Queue) -> Queue:
        changes: dict = {}
        if cohort_name is not UNSET:
            changes["cohort"] = cohort_name or None
        if weight is not UNSET:
            changes["weight"] = float(weight)
        if strategy is not UNSET:
            changes["strategy"] = type(current.strategy)(strategy)
        if preemption_policy is not UNSET:
            changes["preemption"] = type(current.preemption)(preemption_policy)
        if clean:
            merged = dict(current.quotas)
            merged.update({flavor.name: Quota(**quota) for flavor, quota in clean.items()})
            changes["quotas"] = merged
        return replace(current, **changes)

    return _preview(lambda queues: {queue_name: change(queues[queue_name])}, now=now, cluster=cluster,
                    subject={"queue": queue_name})


def team_allotment_preview(*, actor, team_name: str, allotments: dict, now: float | None = None,
                           cluster: Cluster | None = None) -> dict:
    """Admins: the effect of a new allotment, assuming the team's queues' nominal quotas of each changed flavor are
    scaled to fill it in proportion to their current nominal quotas (split evenly when they have none)."""
    if not is_admin(actor):
        raise PermissionDenied("only admins preview allotment changes")
    team = Team.objects.filter(name=team_name).first()
    if team is None:
        raise Team.DoesNotExist(team_name)
    errors = Errors()
    clean = _clean_allotments(errors, allotments)
    errors.raise_if_any()
    names = sorted(QueueRow.objects.filter(team=team).values_list("name", flat=True))

    def change(queues: dict[str, Queue]) -> dict[str, Queue]:
        changed = {name: queues[name] for name in names if name in queues}
        for flavor, gpus in clean.items():
            holders = [name for name in changed if flavor.name in changed[name].quotas] or list(changed)
            if not holders:
                continue
            current = {name: changed[name].quotas.get(flavor.name, Quota(0)).nominal for name in holders}
            total = sum(current.values())
            shares = _split(gpus, [current[n] if total else 1 for n in holders])
            for name, nominal in zip(holders, shares):
                old = changed[name].quotas.get(flavor.name, Quota(0))
                lending = None if old.lending_limit is None else min(old.lending_limit, nominal)
                quotas = dict(changed[name].quotas)
                quotas[flavor.name] = Quota(nominal, old.borrowing_limit, lending)
                changed[name] = replace(changed[name], quotas=quotas)
        return changed

    result = _preview(change, now=now, cluster=cluster, subject={"team": team_name})
    result["assumption"] = ("the team's queues' nominal quotas of each changed flavor are scaled to the new allotment "
                            "in proportion to their current nominal quotas")
    return result


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` in integer parts proportional to `weights` (largest remainders)."""
    weight_sum = sum(weights) or 1
    raw = [total * w / weight_sum for w in weights]
    parts = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: -(raw[i] - parts[i]))[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _preview(changes, *, now: float | None, cluster: Cluster | None, subject: dict) -> dict:
    if cluster is None:
        from scheduling.cluster.registry import RecordedNodes

        cluster = RecordedNodes()
    now = clock.moment(now)
    with transaction.atomic():
        snapshot, _ = snapshot_build(now=now, cluster=cluster)
        transaction.set_rollback(True)  # a preview reads; should anything write, it is undone
    changed = changes(dict(snapshot.queues))
    result = what_if(snapshot, changed, horizon_s=settings.GANGWAY_ESTIMATE_HORIZON_S).to_dict()
    for job in result["jobs"]:
        job["estimated_start_before"] = iso(job["estimated_start_before"])
        job["estimated_start_after"] = iso(job["estimated_start_after"])
    result["now"] = iso(now)
    result["proposed"] = {
        name: {
            "cohort": queue.cohort, "weight": queue.weight, "strategy": queue.strategy.value,
            "preemption_policy": queue.preemption.value,
            "quotas": {f: {"nominal": q.nominal, "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit}
                       for f, q in sorted(queue.quotas.items())},
        }
        for name, queue in sorted(changed.items())
    }
    return {**subject, **result, "saved": False}
