"""seed_demo builds the demo world once: fleet, teams, allotments that sum to the fleet, users, jobs."""

from __future__ import annotations

from django.core.management import call_command
from django.db.models import Sum

from scheduling.models import Job, Node, PlanStatus, PreemptionPlan, Queue, QueueQuota, Team, TeamAllotment
from tests.conftest import stored_explanation


def test_seed_demo_is_idempotent_and_leaves_running_and_pending_jobs(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("seed_demo")
    counts = (Node.objects.count(), Team.objects.count(), Queue.objects.count(), Job.objects.count())
    assert counts[:3] == (136, 8, 8)
    for flavor, total in Node.objects.values_list("flavor__name").annotate(gpus=Sum("allocatable_gpus")):
        assert TeamAllotment.objects.filter(flavor__name=flavor).aggregate(s=Sum("gpus"))["s"] == total
        assert QueueQuota.objects.filter(flavor__name=flavor).aggregate(s=Sum("nominal"))["s"] == total
    states = set(Job.objects.values_list("state", flat=True))
    assert "running" in states and "pending" in states
    big = Job.objects.get(name="frontier-pretrain-48x8")
    assert big.state == "pending" and stored_explanation(big)["blocking"] == "quota"
    # Its team lent the quota it needs: reclaiming it is a cross-team plan that waits for the admin.
    assert PreemptionPlan.objects.get(job=big).status == PlanStatus.PROPOSED

    call_command("seed_demo")
    assert (Node.objects.count(), Team.objects.count(), Queue.objects.count(), Job.objects.count()) == counts
