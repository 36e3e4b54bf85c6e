"""Every transition of the pass is a compare-and-set: a job changed while the pass ran is never overwritten."""

from __future__ import annotations

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.core.model import JobState
from scheduling.models import JobEvent, Placement, PreemptionPlan, ReconcileState, SimulatedWorkload
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, job_cancel, job_submit, preemption_approve
from tests.conftest import H100

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("every_plan_runs")]
T0 = 1_800_000_000.0


class CancelDuringThePass(SimulatedCluster):
    """Cancels the given jobs after the pass has snapshotted them and before it persists its decisions."""

    lists_node_rows = False  # list_nodes is this test's hook: the pass must call it every time

    def __init__(self, user, job_ids):
        self.user, self.job_ids = user, list(job_ids)

    def list_nodes(self):
        while self.job_ids:
            job_cancel(user=self.user, job_id=self.job_ids.pop())
        return super().list_nodes()


def submit(org, *, name="gang", count=1, at=T0, queue="vision-main", user="vision-researcher"):
    return job_submit(user=org[user], queue_name=queue, flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": count, "gpus_per_pod": 8}], runtime_limit_s=600, now=at)


def reasons(job) -> list[str]:
    return list(JobEvent.objects.filter(job=job).order_by("id").values_list("reason", flat=True))


def test_a_job_cancelled_between_snapshot_and_persist_stays_cancelled_and_the_lost_race_is_counted(org):
    job = submit(org)

    result = reconcile_pass_run(now=T0 + 1, cluster=CancelDuringThePass(org["vision-researcher"], [job.pk]))

    job.refresh_from_db()
    assert (job.state, job.admission_generation, result.admitted, result.lost_races) == ("cancelled", 0, [], [job.pk])
    assert reasons(job) == ["submitted", "cancelled"]
    assert not Placement.objects.filter(job=job).exists() and not SimulatedWorkload.objects.exists()
    assert ReconcileState.objects.get().lost_races == 1
    assert invariant_violations(cluster=SimulatedCluster()) == []


@pytest.fixture
def approved_reclaim(org):
    """Language borrows the whole fleet; vision's job reclaims its quota through a plan an admin approved."""
    borrower = submit(org, user="language-researcher", queue="language-main", name="borrower", count=8)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    owner = submit(org, name="reclaimer", count=2, at=T0 + 3)
    reconcile_pass_run(now=T0 + 4)
    preemption_approve(actor=org["admin"], plan_id=PreemptionPlan.objects.get(job=owner).pk)
    return borrower, owner


def test_an_admission_whose_job_was_cancelled_preempts_nobody(org, approved_reclaim):
    borrower, owner = approved_reclaim

    result = reconcile_pass_run(now=T0 + 6, cluster=CancelDuringThePass(org["vision-researcher"], [owner.pk]))

    assert (result.admitted, result.preempted, result.lost_races) == ([], [], [owner.pk])
    borrower.refresh_from_db()
    assert borrower.state == "running"
    assert invariant_violations(cluster=SimulatedCluster()) == []


def test_a_victim_cancelled_during_the_pass_is_not_requeued_and_the_admission_still_stands(org, approved_reclaim):
    borrower, owner = approved_reclaim

    result = reconcile_pass_run(now=T0 + 6, cluster=CancelDuringThePass(org["language-researcher"], [borrower.pk]))

    assert (result.admitted, result.preempted, result.lost_races) == ([owner.pk], [], [borrower.pk])
    borrower.refresh_from_db()
    assert borrower.state == "cancelled" and "requeued" not in reasons(borrower)
    assert invariant_violations(cluster=SimulatedCluster()) == []


def test_a_finished_job_keeps_no_placements_so_a_healthy_fleet_passes_the_invariants(org):
    job = submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)

    result = reconcile_pass_run(now=T0 + 10_000)

    job.refresh_from_db()
    assert result.finished == [job.pk] and job.state == JobState.SUCCEEDED
    assert not Placement.objects.filter(job=job).exists()
    assert invariant_violations(cluster=SimulatedCluster()) == []


def test_cancelling_a_running_job_frees_its_gpus_at_once_and_the_next_pass_suspends_it_for_good(org):
    job = submit(org, count=2)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)

    job_cancel(user=org["vision-researcher"], job_id=job.pk)
    assert not Placement.objects.filter(job=job).exists()
    reconcile_pass_run(now=T0 + 3)
    reconcile_pass_run(now=T0 + 4)

    job.refresh_from_db()
    assert (job.state, job.applied_generation) == ("cancelled", 0)
    assert reasons(job) == ["submitted", "admitted", "pods_ready", "cancelled"]
    assert not SimulatedWorkload.objects.filter(job=job).exists()
