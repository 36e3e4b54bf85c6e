"""Plans awaiting an admin survive the pass: stored with the state they were planned on, loaded back as made."""

from __future__ import annotations

import pytest

from scheduling.cluster.registry import get_cluster
from scheduling.core.cycle import run_admission_cycle
from scheduling.models import PlanStatus, PreemptionPlan
from scheduling.services import admission_cycle_run
from scheduling.snapshots import snapshot_build
from tests.conftest import stored_explanation
from tests.services.test_reconcile import T0, submit

pytestmark = pytest.mark.usefixtures("every_plan_runs")


def test_a_plan_awaiting_approval_is_proposed_again_from_the_database_without_planning(org):
    borrower = submit(org, user="language-researcher", queue="language-main", count=8, gpus=8, limit_s=7200, name="borrower")
    admission_cycle_run(now=T0 + 1)
    admission_cycle_run(now=T0 + 2)
    owner = submit(org, count=2, gpus=8, at=T0 + 3, name="reclaimer")
    admission_cycle_run(now=T0 + 4)
    row = PreemptionPlan.objects.get(job=owner)
    assert row.status == PlanStatus.PROPOSED and len(row.state_fingerprint) == 16

    snapshot, _ = snapshot_build(now=T0 + 5, cluster=get_cluster())
    kept = snapshot.awaiting_plans[owner.pk]
    assert (kept.fingerprint, kept.plan.victim_ids, kept.needs_approval) == (row.state_fingerprint, {borrower.pk}, True)
    decisions = run_admission_cycle(snapshot)
    assert decisions.preemptions == (kept,) and decisions.preemptions[0] is kept, "proposed again, not planned again"

    admission_cycle_run(now=T0 + 5)
    assert list(PreemptionPlan.objects.filter(job=owner).values_list("pk", "state_fingerprint")) == [(row.pk, row.state_fingerprint)]
    owner.refresh_from_db()
    preempt = next(f for f in stored_explanation(owner)["fixes"] if f["action"] == "preempt")
    assert "reclaiming 64 GPUs lent to language-main" in preempt["detail"]
