"""Plans awaiting an admin survive the pass: stored with the state they were planned on, loaded back as made, and kept
(same row) while they make room; an approved one runs though the core would now pick other victims."""

from __future__ import annotations

import pytest

from scheduling.cluster.registry import get_cluster
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import JobState
from scheduling.models import Job, JobEvent, PlanStatus, PreemptionPlan
from scheduling.services import reconcile_pass_run, preemption_approve
from scheduling.snapshots import snapshot_build
from tests.conftest import stored_explanation
from tests.services.test_reconcile import T0, submit

pytestmark = pytest.mark.usefixtures("every_plan_runs")


def test_a_plan_awaiting_approval_is_proposed_again_from_the_database_without_planning(org):
    borrower = submit(org, user="language-researcher", queue="language-main", count=8, gpus=8, limit_s=7200, name="borrower")
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    owner = submit(org, count=2, gpus=8, at=T0 + 3, name="reclaimer")
    reconcile_pass_run(now=T0 + 4)
    row = PreemptionPlan.objects.get(job=owner)
    assert row.status == PlanStatus.PROPOSED and len(row.state_fingerprint) == 16

    snapshot, _ = snapshot_build(now=T0 + 5, cluster=get_cluster())
    kept = snapshot.awaiting_plans[owner.pk]
    assert (kept.fingerprint, kept.plan.victim_ids, kept.needs_approval) == (row.state_fingerprint, {borrower.pk}, True)
    decisions = run_admission_cycle(snapshot)
    assert decisions.preemptions == (kept,) and decisions.preemptions[0] is kept, "proposed again, not planned again"

    reconcile_pass_run(now=T0 + 5)
    assert list(PreemptionPlan.objects.filter(job=owner).values_list("pk", "state_fingerprint")) == [(row.pk, row.state_fingerprint)]
    owner.refresh_from_db()
    preempt = next(f for f in stored_explanation(owner)["fixes"] if f["action"] == "preempt")
    assert "reclaiming 64 GPUs lent to language-main" in preempt["detail"]


def test_a_plan_keeps_its_row_while_the_state_changes_and_runs_once_approved_though_the_core_would_pick_another(org):
    borrowers = [submit(org, user="language-researcher", queue="language-main", count=2, gpus=8, limit_s=7200, at=T0 + i,
                        name=f"borrower-{i}") for i in range(4)]
    reconcile_pass_run(now=T0 + 5)
    reconcile_pass_run(now=T0 + 6)
    owner = submit(org, count=2, gpus=8, at=T0 + 7, name="reclaimer")
    reconcile_pass_run(now=T0 + 8)
    row = PreemptionPlan.objects.get(job=owner)
    (victim,) = row.victims.all()

    # The state changes (the core plans again) and the core would now reclaim another borrower first.
    other = next(b for b in borrowers if b.pk != victim.pk)
    Job.objects.filter(pk=other.pk).update(priority=-5)
    PreemptionPlan.objects.filter(pk=row.pk).update(state_fingerprint="changed")
    reconcile_pass_run(now=T0 + 9)
    assert list(PreemptionPlan.objects.filter(job=owner).values_list("pk", "status")) == [(row.pk, PlanStatus.PROPOSED)]
    assert list(PreemptionPlan.objects.get(pk=row.pk).victims.values_list("pk", flat=True)) == [victim.pk]
    preempt = next(f for f in stored_explanation(owner)["fixes"] if f["action"] == "preempt")
    assert preempt["jobs"] == [victim.pk], "the page's fix names the plan the admin sees"

    preemption_approve(actor=org["admin"], plan_id=row.pk)
    result = reconcile_pass_run(now=T0 + 10)
    assert result.admitted == [owner.pk] and result.preempted == [victim.pk]
    assert list(PreemptionPlan.objects.filter(job=owner).values_list("pk", "status")) == [(row.pk, PlanStatus.EXECUTED)]
    event = JobEvent.objects.get(job=victim, reason="preempted")
    assert event.message == f"preempted by plan #{row.pk} for job #{owner.pk}, approved by admin"
    assert Job.objects.get(pk=other.pk).state == JobState.RUNNING
