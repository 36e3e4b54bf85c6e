"""Borrowing over time: per cohort and flavor, the GPUs each queue held beyond its nominal quota (borrowed) and the
unused nominal quota of each lender those borrowers held (lent), from the stored per-queue use rollups.

A rollup bucket says how many GPU-seconds a queue's jobs held; the queue's nominal quota turns that into borrowed
or lendable GPUs for the bucket. Lending is attributed as the queues page does: the cohort's borrowing comes from
its pool, shared out over the queues that could lend, in proportion to what each could lend. Quotas and cohorts are
today's (a quota changed within the window is read at its current value; the audit log has the change).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Sum

from scheduling import clock
from scheduling.models import QueueQuota, QueueUsageRollup
from scheduling.services.common import to_datetime
from scheduling.selectors.usage import WINDOWS, Epoch


@dataclass
class QueueBorrowing:
    queue: str
    team: str
    borrowed_gpus: list[float]
    """Mean GPUs held beyond nominal quota, per bin."""
    lent_gpus: list[float]
    """Mean GPUs of its unused nominal quota that borrowers held, per bin."""
    bins_with_data: int = 1
    """Bins in which use was collected: the means are over those (a fresh install has a few minutes of an hour)."""

    @property
    def mean_borrowed_gpus(self) -> float:
        return round(sum(self.borrowed_gpus) / max(1, self.bins_with_data), 1)

    @property
    def peak_borrowed_gpus(self) -> float:
        return max(self.borrowed_gpus, default=0.0)

    @property
    def mean_lent_gpus(self) -> float:
        return round(sum(self.lent_gpus) / max(1, self.bins_with_data), 1)


@dataclass
class CohortBorrowingOverTime:
    cohort: str
    flavor: str
    bins: list[float]
    """Start of each bin, epoch seconds."""
    queues: list[QueueBorrowing] = field(default_factory=list)
    """Queues that borrowed or lent in the window, the biggest borrowers first."""

    def chart(self) -> dict:
        return {
            "t": [to_datetime(start).isoformat() for start in self.bins],
            "borrowed": {q.queue: q.borrowed_gpus for q in self.queues if any(q.borrowed_gpus)},
            "lent": {q.queue: q.lent_gpus for q in self.queues if any(q.lent_gpus)},
        }

    def rows(self) -> list[tuple[float, list[float]]]:
        """Per bin: its start and each queue's borrowed (positive) or lent (negative) GPUs, in `queues` order."""
        return [(start, [round(q.borrowed_gpus[i] - q.lent_gpus[i], 1) for q in self.queues]) for i, start in enumerate(self.bins)]


def share_lending(lendable_gpus: dict[str, float], borrowed_gpus: float) -> dict[str, float]:
    """The cohort's borrowed GPUs attributed to the queues that could lend, in proportion to what each could lend."""
    total = sum(lendable_gpus.values())
    if total <= 0 or borrowed_gpus <= 0:
        return {}
    taken = min(borrowed_gpus, total)
    return {queue: taken * gpus / total for queue, gpus in lendable_gpus.items() if gpus > 0}


def borrowing_over_time(*, window: str, team: str | None = None, now: float | None = None) -> list[CohortBorrowingOverTime]:
    """One entry per cohort and flavor in which some queue borrowed during the window ("1h", "24h", "7d"); with
    `team`, only the cohorts of that team's queues. Two queries: the quotas, and held GPU-seconds per queue and bucket."""
    window_s, step_s = WINDOWS[window]
    now = clock.moment(now)
    first = (now - window_s) - (now - window_s) % step_s
    bins = [first + i * step_s for i in range(max(1, int(-(-(now - first) // step_s))))]
    quotas = {}
    for row in QueueQuota.objects.filter(queue__cohort__isnull=False).values(
            "queue_id", "queue__name", "queue__team__name", "queue__cohort__name", "flavor_id", "flavor__name", "nominal", "lending_limit"):
        quotas[(row["queue_id"], row["flavor_id"])] = row
    if team is not None:
        cohorts = {(q["queue__cohort__name"], q["flavor__name"]) for q in quotas.values() if q["queue__team__name"] == team}
        quotas = {key: q for key, q in quotas.items() if (q["queue__cohort__name"], q["flavor__name"]) in cohorts}
    held = defaultdict(dict)  # (cohort, flavor, bucket start, bucket seconds) -> {(queue, flavor) key: GPUs held}
    rows = (QueueUsageRollup.objects.filter(start__gte=to_datetime(first), start__lte=to_datetime(now), queue_id__isnull=False)
            .values("queue_id", "flavor_id", "start", "bucket_s").annotate(gpu_s=Sum("allocated_gpu_s"), start_s=Epoch("start"))
            .order_by().values_list("queue_id", "flavor_id", "start_s", "bucket_s", "gpu_s"))  # seconds, not datetimes
    for queue_id, flavor_id, start_s, bucket_s, gpu_s in rows:
        quota = quotas.get((queue_id, flavor_id))
        if quota is not None:
            bucket = (quota["queue__cohort__name"], quota["flavor__name"], start_s, bucket_s)
            held[bucket][(queue_id, flavor_id)] = gpu_s / bucket_s

    members = defaultdict(list)
    for key, quota in quotas.items():
        members[(quota["queue__cohort__name"], quota["flavor__name"])].append(key)
    borrowed = defaultdict(lambda: [0.0] * len(bins))  # GPU-seconds per bin until divided by the seconds covered
    lent = defaultdict(lambda: [0.0] * len(bins))
    covered_s = defaultdict(lambda: [0.0] * len(bins))
    for (cohort, flavor, start, bucket_s), held_by_queue in held.items():
        index = int((start - first) // step_s)
        if not 0 <= index < len(bins):
            continue
        covered_s[(cohort, flavor)][index] += bucket_s
        weight = bucket_s
        lendable, borrowed_total = {}, 0.0
        for key in members[(cohort, flavor)]:
            quota, gpus = quotas[key], held_by_queue.get(key, 0.0)
            over = max(0.0, gpus - quota["nominal"])
            borrowed[key][index] += over * weight
            borrowed_total += over
            unused = max(0.0, quota["nominal"] - gpus)
            lendable[key] = unused if quota["lending_limit"] is None else min(unused, quota["lending_limit"])
        for key, gpus in share_lending(lendable, borrowed_total).items():
            lent[key][index] += gpus * weight

    result = []
    for (cohort, flavor), keys in sorted(members.items()):
        covered = covered_s[(cohort, flavor)]

        def per_bin(gpu_s: list[float]) -> list[float]:
            return [round(v / seconds, 1) if seconds else 0.0 for v, seconds in zip(gpu_s, covered)]

        queues = [
            QueueBorrowing(queue=quotas[key]["queue__name"], team=quotas[key]["queue__team__name"],
                           borrowed_gpus=per_bin(borrowed[key]), lent_gpus=per_bin(lent[key]),
                           bins_with_data=sum(1 for seconds in covered if seconds))
            for key in keys if any(borrowed[key]) or any(lent[key])
        ]
        if any(any(q.borrowed_gpus) for q in queues):
            queues.sort(key=lambda q: (-q.mean_borrowed_gpus, -q.mean_lent_gpus, q.queue))
            result.append(CohortBorrowingOverTime(cohort=cohort, flavor=flavor, bins=bins, queues=queues))
    return result
