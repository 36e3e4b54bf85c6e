"""Prometheus metrics of the control plane, read from the database at scrape time (names after Kueue's)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterator

from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from scheduling import clock
from scheduling.core.model import JobState
from scheduling.models import EventReason, Explanation, Job, JobEvent, PlanStatus, PreemptionVictim, QueueQuota, ReconcileState
from scheduling.models.jobs import HOLDING_STATES

WAIT_BUCKETS_S = (10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 7 * 24 * 3600)


class GangwayCollector:
    """One collection per scrape: each family from one or two aggregate queries."""

    def collect(self) -> Iterator:
        now = clock.now_s()
        yield from _pending()
        yield _admission_wait()
        yield from _queues()
        yield from _preemptions()
        yield from _passes()
        yield from _ages(now)


def _pending():
    family = GaugeMetricFamily("gangway_pending_workloads", "Pending jobs by queue and blocking reason (the explanation's level).",
                               labels=["queue", "reason"])
    blocking = dict(Explanation.objects.values_list("key", "data__blocking"))
    jobs: dict[tuple[str, str], int] = defaultdict(int)
    for queue, key, count in (Job.objects.filter(state=JobState.PENDING.value).values("queue__name", "explanation_key")
                              .annotate(jobs=Count("id")).order_by("queue__name").values_list("queue__name", "explanation_key", "jobs")):
        jobs[(queue, blocking.get(key) or "unexplained")] += count
    for labels, count in jobs.items():
        family.add_metric(list(labels), count)
    yield family


def _admission_wait() -> HistogramMetricFamily:
    """Every admission (requeued jobs count again), from submit time to the admission."""
    wait = ExpressionWrapper(F("created_at") - F("job__submitted_at"), output_field=DurationField())
    admissions = JobEvent.objects.filter(reason=EventReason.ADMITTED).annotate(wait=wait)
    totals = admissions.aggregate(
        count=Count("id"), sum=Sum("wait"),
        **{f"le_{b}": Count("id", filter=Q(wait__lte=dt.timedelta(seconds=b))) for b in WAIT_BUCKETS_S},
    )
    buckets = [(str(float(b)), totals[f"le_{b}"]) for b in WAIT_BUCKETS_S] + [("+Inf", totals["count"])]
    total_s = totals["sum"].total_seconds() if totals["sum"] else 0.0
    return HistogramMetricFamily("gangway_admission_wait_time_seconds", "Time from submission to admission.",
                                 buckets=buckets, sum_value=total_s)


def _queues():
    usage = GaugeMetricFamily("gangway_queue_resource_usage", "GPUs held by admitted and running jobs.", labels=["queue", "flavor"])
    nominal = GaugeMetricFamily("gangway_queue_nominal_quota", "Nominal GPU quota.", labels=["queue", "flavor"])
    borrowed = GaugeMetricFamily("gangway_queue_borrowed_gpus", "GPUs used beyond the nominal quota.", labels=["queue", "flavor"])
    held = {
        (row["queue__name"], row["flavor__name"]): row["gpus"]
        for row in Job.objects.filter(state__in=HOLDING_STATES).values("queue__name", "flavor__name").annotate(gpus=Sum("gpus"))
    }
    quotas = dict(((q, f), n) for q, f, n in QueueQuota.objects.values_list("queue__name", "flavor__name", "nominal"))
    for key in sorted({*held, *quotas}):
        used, quota = held.get(key, 0), quotas.get(key, 0)
        usage.add_metric(list(key), used)
        nominal.add_metric(list(key), quota)
        borrowed.add_metric(list(key), max(0, used - quota))
    yield from (usage, nominal, borrowed)


def _preemptions():
    preempted = CounterMetricFamily("gangway_preempted_workloads", "Jobs preempted by executed plans, by the plan's reason.",
                                    labels=["reason"])
    for reason, victims in (PreemptionVictim.objects.filter(plan__status=PlanStatus.EXECUTED).values_list("plan__reason")
                            .annotate(n=Count("id")).order_by("plan__reason")):
        preempted.add_metric([reason], victims)
    evicted = CounterMetricFamily("gangway_evicted_workloads", "Jobs evicted, by reason.", labels=["reason"])
    evicted.add_metric(["pods_not_ready"], JobEvent.objects.filter(reason=EventReason.PODS_NOT_READY).count())
    yield from (preempted, evicted)


def _passes():
    state = ReconcileState.objects.filter(pk=1).first()
    phases = GaugeMetricFamily("gangway_reconcile_pass_duration_seconds", "Wall time of each step of the last reconcile pass.",
                               labels=["phase"])
    for name, seconds in sorted((state.last_pass_phases_s if state else {}).items()):
        phases.add_metric([name], seconds)
    yield phases
    yield CounterMetricFamily("gangway_reconcile_passes", "Reconcile passes run.", value=state.passes if state else 0)
    yield CounterMetricFamily("gangway_transition_conflicts", "Decisions not written because the job changed during the pass.",
                              value=state.lost_races if state else 0)
    yield CounterMetricFamily("gangway_cluster_api_errors", "Releases and suspensions the cluster refused (each retried).",
                              value=state.cluster_errors if state else 0)
    last = GaugeMetricFamily("gangway_reconcile_last_pass_timestamp_seconds", "When the last pass ran.")
    last.add_metric([], state.last_pass_at.timestamp() if state and state.last_pass_at else 0)
    yield last


def _ages(now: float):
    """The oldest explanation and estimate among pending jobs: how stale what the pages show can be."""
    pending = Job.objects.filter(state=JobState.PENDING.value)
    oldest = {
        "checked": Explanation.objects.filter(key__in=pending.values("explanation_key")).aggregate(at=Min("checked_at"))["at"],
        "estimated": pending.aggregate(at=Min("estimated_at"))["at"],
    }
    checked, estimated = ([moment.timestamp()] if moment else [] for moment in oldest.values())
    for name, helptext, times in (
        ("gangway_explanation_age_seconds", "Age of the oldest pending job's explanation.", checked),
        ("gangway_estimate_age_seconds", "Age of the oldest pending job's start estimate.", estimated),
    ):
        family = GaugeMetricFamily(name, helptext)
        family.add_metric([], max(0.0, now - min(times)) if times else 0.0)
        yield family
