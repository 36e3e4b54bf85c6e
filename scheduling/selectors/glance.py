"""Queues at a glance: per queue and flavor, the GPUs in use within nominal, borrowed, lent out and free; pending
GPUs, the median wait of today's admissions, and who borrows in the cohort. The reader's teams come first."""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import DurationField, ExpressionWrapper, F

from scheduling import clock
from scheduling.models import Job
from scheduling.permissions import team_ids_of
from scheduling.selectors.org import queue_list


@dataclass
class FlavorGlance:
    flavor: str
    nominal: int
    within_nominal_gpus: int
    borrowed_gpus: int
    lent_out_gpus: int
    """Unused nominal quota that borrowers of the cohort hold, attributed to lenders in proportion to what each may lend."""
    free_gpus: int
    pending_gpus: int = 0

    @property
    def scale_gpus(self) -> int:
        return max(1, self.nominal + self.borrowed_gpus)

    def percent(self, gpus: int) -> float:
        return round(100.0 * gpus / self.scale_gpus, 2)

    @property
    def segments(self) -> list[tuple[str, str, int, float]]:
        """(css class, label, GPUs, width %) of the bar, left to right."""
        parts = [("in-use", "in use within nominal", self.within_nominal_gpus), ("borrowed", "borrowed", self.borrowed_gpus),
                 ("lent", "lent out", self.lent_out_gpus), ("free", "free", self.free_gpus)]
        return [(css, label, gpus, self.percent(gpus)) for css, label, gpus in parts if gpus]


@dataclass
class QueueGlance:
    name: str
    team: str
    cohort: str | None
    is_own: bool
    flavors: list[FlavorGlance] = field(default_factory=list)
    p50_wait_today_s: float | None = None
    admitted_today: int = 0


@dataclass
class CohortBorrowing:
    cohort: str
    flavor: str
    borrowers: list[tuple[str, int]]
    """(queue, GPUs borrowed), most first."""
    lenders: list[tuple[str, int]]
    """(queue, GPUs lent out), most first."""


def queue_glance(*, user, team: str | None = None, now: dt.datetime | None = None,
                 queues: list | None = None) -> tuple[list[QueueGlance], list[CohortBorrowing]]:
    """Today's admissions, and `queues` (from selectors.queue_list; read here when not given) with their quotas, use
    and pending GPUs. With `team`: that team's queues, and the borrowing of the cohorts they are in (lending is
    shared out over the whole cohort all the same)."""
    now = now or clock.now_datetime()
    queues = queue_list() if queues is None else queues
    own = team_ids_of(user)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    waits = defaultdict(list)
    wait = ExpressionWrapper(F("admitted_at") - F("submitted_at"), output_field=DurationField())  # one interval a row
    admitted = Job.objects.filter(admitted_at__gte=midnight)
    if team is not None:  # only its queues' waits are shown; a busy day is tens of thousands of admissions
        admitted = admitted.filter(queue__team__name=team)
    for queue_id, waited in admitted.annotate(wait=wait).order_by().values_list("queue_id", "wait"):
        waits[queue_id].append(max(0.0, waited.total_seconds()))

    glances, lendable, borrowed = [], defaultdict(dict), defaultdict(dict)
    for queue in queues:
        glance = QueueGlance(name=queue.name, team=queue.team.name, cohort=queue.cohort.name if queue.cohort else None,
                             is_own=queue.team_id in own, admitted_today=len(waits[queue.pk]),
                             p50_wait_today_s=statistics.median(waits[queue.pk]) if waits[queue.pk] else None)
        for quota in queue.quotas.all():
            in_use = queue.gpus_in_use.get(quota.flavor.name, 0)
            within = min(in_use, quota.nominal)
            unused = quota.nominal - within
            glance.flavors.append(FlavorGlance(
                flavor=quota.flavor.name, nominal=quota.nominal, within_nominal_gpus=within,
                borrowed_gpus=max(0, in_use - quota.nominal), lent_out_gpus=0, free_gpus=unused,
                pending_gpus=_pending_gpus(queue, quota.flavor.name),
            ))
            if glance.cohort:
                key = (glance.cohort, quota.flavor.name)
                lendable[key][queue.name] = unused if quota.lending_limit is None else min(unused, quota.lending_limit)
                borrowed[key][queue.name] = max(0, in_use - quota.nominal)
        glances.append(glance)

    lent = _attribute_lending(lendable, borrowed)
    for glance in glances:
        for flavor in glance.flavors:
            flavor.lent_out_gpus = lent.get((glance.cohort, flavor.flavor), {}).get(glance.name, 0)
            flavor.free_gpus -= flavor.lent_out_gpus
    glances.sort(key=lambda g: (not g.is_own, g.name))
    if team is not None:
        glances = [g for g in glances if g.team == team]
        borrowed = {key: by_queue for key, by_queue in borrowed.items() if key[0] in {g.cohort for g in glances}}
    cohorts = [
        CohortBorrowing(
            cohort=cohort, flavor=flavor,
            borrowers=sorted(((q, g) for q, g in borrowed[(cohort, flavor)].items() if g), key=lambda x: (-x[1], x[0])),
            lenders=sorted(((q, g) for q, g in lent.get((cohort, flavor), {}).items() if g), key=lambda x: (-x[1], x[0])),
        )
        for cohort, flavor in sorted(borrowed) if any(borrowed[(cohort, flavor)].values())
    ]
    return glances, cohorts


def _pending_gpus(queue, flavor: str) -> int:
    """As the last reconcile pass counted them (QueueUsage): no sum over every pending job per page view."""
    usage = getattr(queue, "usage", None)
    return (usage.pending_gpus or {}).get(flavor, 0) if usage is not None else 0


def _attribute_lending(lendable: dict, borrowed: dict) -> dict:
    """Borrowed GPUs do not come from one named lender; share each cohort's borrowing out over the queues that can
    lend, in proportion to what each may lend (whole GPUs, the remainder to the largest lenders)."""
    lent = {}
    for key, can_lend in lendable.items():
        total_borrowed = sum(borrowed.get(key, {}).values())
        total_lendable = sum(can_lend.values())
        if not total_borrowed or not total_lendable:
            continue
        taken = min(total_borrowed, total_lendable)
        shares = {q: taken * g // total_lendable for q, g in can_lend.items()}
        for q in sorted(can_lend, key=lambda q: -can_lend[q])[: taken - sum(shares.values())]:
            shares[q] += 1
        lent[key] = {q: min(s, can_lend[q]) for q, s in shares.items()}
    return lent
