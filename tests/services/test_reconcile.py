"""The reconcile pass end to end on a small simulated fleet: admit, run, finish, preempt, evict, heal."""

from __future__ import annotations

import pytest
from django.test import override_settings

from scheduling.cluster.base import WorkloadPhase, WorkloadStatus
from scheduling.cluster.simulated import SimulatedCluster, simulated_duration_s
from scheduling.core.model import JobState
from scheduling.models import Job, JobEvent, Node, QueueQuota, Placement, PlanStatus, PreemptionPlan, QueueUsage, SimulatedWorkload
from scheduling.services import reconcile_pass_run, job_cancel, job_submit, preemption_approve, priority_class_create
from tests.conftest import H100, stored_explanation

pytestmark = pytest.mark.usefixtures("every_plan_runs")

T0 = 1_800_000_000.0


def submit(org, *, user="vision-researcher", queue="vision-main", count=1, gpus=8, at=T0, limit_s=600, **kw):
    return job_submit(
        user=org[user],
        queue_name=queue,
        flavor_name=H100,
        name=kw.pop("name", f"job-{count}x{gpus}"),
        pod_sets=[{"name": "worker", "count": count, "gpus_per_pod": gpus}],
        runtime_limit_s=limit_s,
        checkpoint_interval_s=kw.pop("checkpoint_interval_s", 300),
        now=at,
        **kw,
    )


def state(job) -> str:
    job.refresh_from_db()
    return job.state


def test_a_gang_is_admitted_all_or_nothing_then_runs(org):
    job = submit(org, count=3, gpus=8)
    result = reconcile_pass_run(now=T0 + 1)
    assert result.admitted == [job.pk]
    job.refresh_from_db()
    assert job.state == JobState.ADMITTED
    assert (job.admission_generation, job.applied_generation) == (1, 1)
    placements = list(Placement.objects.filter(job=job))
    assert len(placements) == 3 and len({p.node_id for p in placements}) == 3
    assert SimulatedWorkload.objects.get(job=job).generation == 1

    result = reconcile_pass_run(now=T0 + 2)
    assert result.started == [job.pk]
    assert state(job) == JobState.RUNNING
    assert list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True)) == ["pending", "admitted", "running"]


def test_running_the_pass_again_changes_nothing(org):
    submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    events, placements = JobEvent.objects.count(), Placement.objects.count()
    result = reconcile_pass_run(now=T0 + 3)
    assert (result.admitted, result.started, result.finished) == ([], [], [])
    assert (JobEvent.objects.count(), Placement.objects.count()) == (events, placements)


def test_a_gang_beyond_quota_and_free_gpus_waits_with_its_reason_while_smaller_jobs_run_then_starts_when_they_finish(org):
    small = submit(org, count=1, gpus=8, limit_s=600, name="small")
    other = submit(org, user="language-researcher", queue="language-main", count=4, gpus=8, limit_s=900, name="other")
    reconcile_pass_run(now=T0 + 1)
    big = submit(org, count=4, gpus=8, at=T0 + 2, limit_s=600, name="big")
    reconcile_pass_run(now=T0 + 3)
    assert state(small) == JobState.RUNNING and state(other) == JobState.RUNNING
    big.refresh_from_db()
    assert big.state == JobState.PENDING
    assert stored_explanation(big)["blocking"] in {"quota", "fit"}
    assert "32" in stored_explanation(big)["summary"]
    assert not Placement.objects.filter(job=big).exists()

    # Advance the clock past every running job's simulated duration: they succeed, the gang gets in.
    done_at = T0 + 1 + max(simulated_duration_s(job_id=j.pk, runtime_limit_s=j.runtime_limit_s) for j in (small, other)) + 1
    result = reconcile_pass_run(now=done_at)
    assert sorted(result.finished) == sorted([small.pk, other.pk])
    assert result.admitted == [big.pk]
    assert state(small) == JobState.SUCCEEDED and state(big) == JobState.ADMITTED
    assert Placement.objects.filter(job=big).count() == 4


def test_a_whole_node_gang_waits_on_fit_when_free_gpus_are_scattered(org):
    Node.objects.update(external_gpus=4)  # every node half used by pods Gangway does not manage
    whole = submit(org, count=1, gpus=8, name="whole-node")
    halves = submit(org, count=2, gpus=4, name="half-nodes", at=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    assert state(halves) == JobState.ADMITTED
    whole.refresh_from_db()
    assert whole.state == JobState.PENDING
    assert stored_explanation(whole)["blocking"] == "fit"


def test_a_higher_priority_class_goes_first_within_a_queue(org):
    QueueQuota.objects.filter(queue__name="language-main").update(lending_limit=0)
    for name, value in (("low", 0), ("high", 10)):
        priority_class_create(actor=org["admin"], name=name, value=value)
    low = submit(org, count=4, gpus=8, priority_class="low", name="low")
    high = submit(org, count=4, gpus=8, priority_class="high", name="high", at=T0 + 5)
    result = reconcile_pass_run(now=T0 + 10)
    assert high.pk in result.admitted and low.pk not in result.admitted


@pytest.mark.parametrize(
    "pending_s, first",
    [
        pytest.param(10_000, "fresh", id="a job that ran an hour and waited less than four goes behind a fresh job"),
        pytest.param(16_000, "ran-before", id="once it has waited four times its hour it goes back in line by submit time"),
    ],
)
@override_settings(GANGWAY_SCHEDULER={"promote_after_waiting": 4.0})
def test_an_admins_promotion_lets_a_job_that_ran_before_back_in_line_after_waiting_four_times_its_run(org, pending_s, first):
    """SchedulerConfig.promote_after_waiting, from the stored attained service and submit time."""
    QueueQuota.objects.filter(queue__name="language-main").update(lending_limit=0)
    ran = submit(org, count=4, gpus=8, name="ran-before")
    Job.objects.filter(pk=ran.pk).update(attained_gpu_s=32 * 3600.0)  # 32 GPUs for an hour: 32 GPU-hours
    now = T0 + 3600 + pending_s
    fresh = submit(org, count=4, gpus=8, name="fresh", at=now - 60)
    result = reconcile_pass_run(now=now)
    assert result.admitted == [{"fresh": fresh, "ran-before": ran}[first].pk]


def test_no_node_is_over_committed(org):
    for i in range(12):
        submit(org, user="vision-researcher" if i % 2 else "language-researcher",
               queue="vision-main" if i % 2 else "language-main", count=1 + i % 3, gpus=[1, 2, 4, 8][i % 4], at=T0 + i, name=f"j{i}")
    reconcile_pass_run(now=T0 + 20)
    from django.db.models import Sum

    for node in Node.objects.annotate(used=Sum("placements__gpus")):
        assert (node.used or 0) + node.external_gpus <= node.allocatable_gpus


def test_cancelling_a_running_job_suspends_its_gang(org):
    job = submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)
    job_cancel(user=org["vision-researcher"], job_id=job.pk)
    result = reconcile_pass_run(now=T0 + 2)
    assert result.suspended == [job.pk]
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.applied_generation == 0
    assert not SimulatedWorkload.objects.filter(job=job).exists()


class FlakyCluster(SimulatedCluster):
    """Crashes on the first release: the admission is committed but not applied."""

    def __init__(self):
        self.failures = 1

    def release(self, release, now):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("cluster unreachable")
        return super().release(release, now)


def test_a_committed_admission_that_was_not_applied_is_released_by_the_next_pass(org):
    job = submit(org, count=2)
    cluster = FlakyCluster()
    result = reconcile_pass_run(now=T0 + 1, cluster=cluster)
    assert result.apply_failed == [job.pk] and result.released == []
    job.refresh_from_db()
    assert (job.state, job.admission_generation, job.applied_generation) == (JobState.ADMITTED, 1, 0)
    result = reconcile_pass_run(now=T0 + 2, cluster=cluster)
    assert result.released == [job.pk] and result.admitted == []
    job.refresh_from_db()
    assert job.applied_generation == 1 and job.admission_generation == 1


class NeverReadyCluster(SimulatedCluster):
    def workload_statuses(self, workloads, now):
        return {ref.job_id: WorkloadStatus(job_id=ref.job_id, phase=WorkloadPhase.STARTING, generation=ref.generation) for ref in workloads}


def test_a_gang_whose_pods_never_get_ready_is_evicted_and_requeued_with_backoff(org):
    job = submit(org, count=2)
    cluster = NeverReadyCluster()
    reconcile_pass_run(now=T0 + 1, cluster=cluster)
    result = reconcile_pass_run(now=T0 + 1 + 601, cluster=cluster)
    assert job.pk in result.evicted
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.evictions == 1 and job.backoff_until is not None
    assert job.submitted_at.timestamp() == T0
    assert list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True))[-2:] == ["evicted", "pending"]
    assert not Placement.objects.filter(job=job).exists()
    assert not SimulatedWorkload.objects.filter(job=job).exists()


def test_reclaiming_borrowed_quota_from_another_team_waits_for_an_admin_then_executes(org):
    borrower = submit(org, user="language-researcher", queue="language-main", count=8, gpus=8, limit_s=7200, name="borrower")
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    assert state(borrower) == JobState.RUNNING
    borrower.refresh_from_db()
    assert borrower.is_borrowing
    owner = submit(org, count=2, gpus=8, at=T0 + 3, name="reclaimer")
    result = reconcile_pass_run(now=T0 + 4)
    assert result.admitted == []
    plan = PreemptionPlan.objects.get(job=owner)
    assert plan.status == PlanStatus.PROPOSED and plan.needs_approval
    assert plan.teams_affected == ["language"]
    assert list(plan.victims.values_list("id", flat=True)) == [borrower.pk]
    owner.refresh_from_db()
    assert stored_explanation(owner)["blocking"] == "quota" and stored_explanation(owner)["quota"]["limit"] == "lent_out"
    preempt = next(f for f in stored_explanation(owner)["fixes"] if f["action"] == "preempt")
    assert preempt["needs_approval"] and preempt["jobs"] == [borrower.pk] and "awaiting an admin's approval" in preempt["detail"]

    reconcile_pass_run(now=T0 + 5)  # the same plan again: still one open plan
    assert PreemptionPlan.objects.filter(job=owner).count() == 1

    preemption_approve(actor=org["admin"], plan_id=plan.pk)
    result = reconcile_pass_run(now=T0 + 6)
    assert result.admitted == [owner.pk] and result.preempted == [borrower.pk]
    assert result.pending == 1, "the victim counts as pending again"
    plan.refresh_from_db()
    assert plan.status == PlanStatus.EXECUTED
    borrower.refresh_from_db()
    assert borrower.state == JobState.PENDING and borrower.preempted_by_id == owner.pk
    assert borrower.submitted_at.timestamp() == T0
    preempted = JobEvent.objects.get(job=borrower, reason="preempted")
    assert preempted.message == f"preempted by plan #{plan.pk} for job #{owner.pk}, approved by admin"
    assert list(JobEvent.objects.filter(job=borrower).values_list("to_state", flat=True))[-2:] == ["preempted", "pending"]
    assert not SimulatedWorkload.objects.filter(job=borrower).exists()


def test_usage_decays_and_accumulates_per_queue(org):
    submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 101)
    usage = QueueUsage.objects.get(queue__name="vision-main").usage_gpu_s
    assert usage == pytest.approx(16 * 100, rel=0.01)
    assert QueueUsage.objects.get(queue__name="language-main").usage_gpu_s == 0
