"""`manage.py check_invariants`: silent on a healthy state, exit 1 naming each broken invariant."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import Job, JobEvent, Node, Placement, QueueQuota, SimulatedWorkload
from scheduling.selectors.invariants import invariant_violations
from scheduling.services import reconcile_pass_run, job_cancel, job_submit
from tests.conftest import H100

pytestmark = pytest.mark.django_db
T0 = 1_800_000_000.0


@pytest.fixture
def running(org) -> Job:
    job = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="gang",
                     pod_sets=[{"name": "worker", "count": 2, "gpus_per_pod": 8}], runtime_limit_s=36000, now=T0)
    reconcile_pass_run(now=T0 + 1)
    reconcile_pass_run(now=T0 + 2)
    job.refresh_from_db()
    return job


def check() -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("check_invariants", stdout=out, stderr=err)
    except SystemExit as exit_:
        return exit_.code, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_a_healthy_state_passes(running):
    assert check() == (0, "all invariants hold\n", "")


def test_a_healthy_state_after_jobs_finished_and_were_cancelled_passes(running, org):
    cancelled = job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="short",
                           pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}], now=T0 + 3)
    reconcile_pass_run(now=T0 + 4)
    job_cancel(user=org["vision-researcher"], job_id=cancelled.pk)
    reconcile_pass_run(now=T0 + 100_000)  # the running gang finishes

    assert set(Job.objects.values_list("state", flat=True)) == {"succeeded", "cancelled"}
    assert check() == (0, "all invariants hold\n", "")


def overcommit_a_node(job):
    Node.objects.filter(pk=job.placements.first().node_id).update(allocatable_gpus=4)


def shrink_the_quotas(job):
    QueueQuota.objects.update(nominal=0)


def lose_a_pod(job):
    job.placements.last().delete()


def forget_the_admission(job):
    Job.objects.filter(pk=job.pk).update(state="pending")


def apply_a_generation_never_admitted(job):
    Job.objects.filter(pk=job.pk).update(applied_generation=2)


def leave_the_gang_running_after_cancel(job):
    Placement.objects.filter(job=job).delete()
    Job.objects.filter(pk=job.pk).update(state="cancelled", applied_generation=0)


def cancel_but_keep_the_gpus(job):
    Job.objects.filter(pk=job.pk).update(state="cancelled")


def admit_after_the_cancel(job):
    Placement.objects.filter(job=job).delete()
    Job.objects.filter(pk=job.pk).update(state="cancelled", applied_generation=0)
    JobEvent.objects.create(job=job, from_state="running", to_state="cancelled", reason="cancelled")
    JobEvent.objects.create(job=job, from_state="cancelled", to_state="admitted", reason="admitted")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        pytest.param(overcommit_a_node, "is over-committed: 8 GPUs placed, 4 allocatable", id="a node over-committed"),
        pytest.param(shrink_the_quotas, "queue vision-main is over quota for H100-80GB: 16 GPUs held, nominal 0 + borrowable 0",
                     id="a queue over quota"),
        pytest.param(lose_a_pod, "holds GPUs without a full placement: 1 of 2 pods placed", id="an admitted job without a full placement"),
        pytest.param(forget_the_admission, "holds no GPUs but still has placements", id="placements of a job that holds nothing"),
        pytest.param(apply_a_generation_never_admitted, "records admission 2 applied, but was only admitted 1 times",
                     id="a generation applied that was never admitted"),
        pytest.param(leave_the_gang_running_after_cancel, "is cancelled in Gangway but its gang runs in the cluster",
                     id="a gang left running in the cluster"),
        pytest.param(cancel_but_keep_the_gpus, "was cancelled but holds GPUs: 2 pods placed", id="a cancelled job holding GPUs"),
        pytest.param(admit_after_the_cancel, "was admitted after its cancel", id="a cancelled job admitted after its cancel"),
    ],
)
def test_each_broken_invariant_is_named_and_exits_1(running, corrupt, message):
    corrupt(running)

    code, out, err = check()

    assert code == 1
    assert message in err and "VIOLATION" in err


def test_a_committed_admission_not_yet_applied_is_not_a_violation(org):
    job_submit(user=org["vision-researcher"], queue_name="vision-main", flavor_name=H100, name="gang",
               pod_sets=[{"name": "worker", "count": 2, "gpus_per_pod": 8}], now=T0)
    reconcile_pass_run(now=T0 + 1)
    Job.objects.update(applied_generation=0)
    SimulatedWorkload.objects.all().delete()

    assert invariant_violations(cluster=SimulatedCluster()) == []
