"""Explanations and start estimates of pending jobs (stored in Job.explanation), and quota what-if previews (saved nowhere)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import defaultdict
from dataclasses import replace

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F

from scheduling.cluster.base import Cluster
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import PassExplanations, explain_pending, iso
from scheduling.core.model import CycleResult, JobState, Queue, Quota, Snapshot
from scheduling.models import Job, ReconcileState, Team
from scheduling.models import Queue as QueueRow
from scheduling.permissions import is_admin
from scheduling.services.common import Errors
from scheduling.services.org import _clean_allotments
from scheduling.services.queues import UNSET, queue_change_check
from scheduling.simulation.forecast import what_if
from scheduling.snapshots import snapshot_build

WRITE_CHUNK = 2000


def explanations_refresh(*, snapshot: Snapshot, decisions: CycleResult, now: float, stored: dict[int, str]) -> int:
    """Store the explanation of every pending job the pass considered; returns how many rows were written.

    Computed once per distinct shape; a row is written only when its fingerprint (the explanation without
    what grows with time alone, such as a fix's GPU-hours) differs from the one `stored` remembers for it (the
    reconcile pass's cache: job id → fingerprint in its row, updated here), so an unchanged queue costs no read
    and no write. The stored start estimate is kept.
    """
    explained = explain_pending(snapshot, decisions)
    return _store(explained, now=now, estimates=None, stored=stored)


def estimates_refresh(*, now: float | None = None, cluster: Cluster | None = None) -> dict:
    """Run the core forward from the current state and store each pending job's estimated start (and its explanation)."""
    from scheduling.simulation.forecast import forecast

    if cluster is None:
        from scheduling.cluster.registry import RecordedNodes

        cluster = RecordedNodes()
    now = time.time() if now is None else now
    snapshot, _ = snapshot_build(now=now, cluster=cluster)
    decisions = run_admission_cycle(snapshot)
    explained = explain_pending(snapshot, decisions)
    started = time.perf_counter()
    result = forecast(snapshot, horizon_s=settings.GANGWAY_ESTIMATE_HORIZON_S)
    estimates = {job_id: result.starts.get(job_id) for job_id in explained.by_job}
    written = _store(explained, now=now, estimates=estimates)
    # After commit: a pass that remembers the fingerprints it wrote reads them again (see snapshot_cache).
    ReconcileState.objects.filter(pk=1).update(explanations_version=F("explanations_version") + 1)
    return {
        "jobs": len(estimates),
        "within_horizon": sum(1 for v in estimates.values() if v is not None),
        "written": written,
        "forecast_s": round(time.perf_counter() - started, 3),
        "cycles": result.cycles,
    }


GPU_HOURS = re.compile(r"\d+(\.\d+)? GPU-h")


def explanation_fingerprint(data: dict) -> str:
    """Changes when the explanation says something new, not when only the time since a victim started does."""
    stable = {**data, "fixes": [{k: v for k, v in fix.items() if k != "cost_gpu_hours"} for fix in data["fixes"]]}
    text = GPU_HOURS.sub("GPU-h", json.dumps(stable, sort_keys=True))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _store(explained: PassExplanations, *, now: float, estimates: dict[int, float | None] | None,
           stored: dict[int, str] | None = None) -> int:
    """Without `estimates`: write the rows whose fingerprint differs from `stored`, keeping their stored estimate,
    and remember what was written in `stored`. With them (the forecast): write every pending row, with its new
    estimate."""
    by_explanation: dict[int, tuple[dict, str]] = {}
    for explanation in {id(e): e for e in explained.by_job.values()}.values():
        data = explanation.to_dict()
        by_explanation[id(explanation)] = (data, explanation_fingerprint(data))
    ids = list(explained.by_job)
    if estimates is not None:
        changed = []
        for start in range(0, len(ids), WRITE_CHUNK):
            changed.extend(Job.objects.filter(pk__in=ids[start : start + WRITE_CHUNK], state=JobState.PENDING.value)
                           .values_list("id", flat=True))
        kept = {job_id: (iso(estimates.get(job_id)), iso(now)) for job_id in changed}
    else:
        changed = [job_id for job_id in ids if stored.get(job_id) != by_explanation[id(explained.by_job[job_id])][1]]
        kept = {}
        for start in range(0, len(changed), WRITE_CHUNK):
            kept.update((row[0], row[1:]) for row in Job.objects.filter(pk__in=changed[start : start + WRITE_CHUNK]).values_list(
                "id", "explanation__estimated_start", "explanation__estimated_at"))
    groups: dict[tuple, list[int]] = defaultdict(list)
    for job_id in changed:
        groups[(id(explained.by_job[job_id]), *kept.get(job_id, (None, None)))].append(job_id)
    written = 0
    with transaction.atomic():
        for (explanation_id, estimated_start, estimated_at), job_ids in groups.items():
            data, fingerprint = by_explanation[explanation_id]
            value = {**data, "checked_at": now, "estimated_start": estimated_start, "estimated_at": estimated_at}
            for start in range(0, len(job_ids), WRITE_CHUNK):
                written += Job.objects.filter(pk__in=job_ids[start : start + WRITE_CHUNK], state=JobState.PENDING.value).update(
                    explanation=value, explanation_fingerprint=fingerprint)
    if stored is not None:
        stored.update((job_id, by_explanation[id(explained.by_job[job_id])][1]) for job_id in changed)
    return written


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
    now = time.time() if now is None else now
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
