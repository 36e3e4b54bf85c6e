"""The audit log: every change a person makes leaves one record (who, what, before → after, comment), written in
the change's transaction; a refused change leaves none."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from scheduling.models import AuditRecord, Job, PlanStatus, PreemptionPlan, PreemptionVictim, QueueQuota, Team
from scheduling.models.audit import AppendOnlyError
from scheduling.services import (
    job_cancel,
    job_submit,
    node_cordon,
    preemption_approve,
    preemption_reject,
    priority_class_create,
    priority_class_update,
    queue_create,
    queue_update,
    team_create,
    team_update,
)
from tests.conftest import H100

QUOTA_32 = {"nominal": 32, "borrowing_limit": None, "lending_limit": None}


def a_job(org, *, user="vision-researcher", queue="vision-main", name="train") -> Job:
    return job_submit(user=org[user], queue_name=queue, flavor_name=H100, name=name,
                      pod_sets=[{"name": "worker", "count": 1, "gpus_per_pod": 8}])


def a_plan(org) -> PreemptionPlan:
    victim = a_job(org, user="language-researcher", queue="language-main", name="victim")
    plan = PreemptionPlan.objects.create(job=a_job(org), reason="quota", needs_approval=True, teams_affected=["language"])
    PreemptionVictim.objects.create(plan=plan, job=victim, gpus=8, cost_gpu_hours=1.0)
    return plan


def high_class(org):
    return priority_class_create(actor=org["admin"], name="high", value=10, max_gpus_per_team=64)


# (id, change(org) -> target id, who acts, action, target type, team, before, after, comment)
AUDITED = [
    pytest.param(lambda org: team_update(actor=org["admin"], team_name="vision", allotments={H100: 48}) and "vision",
                 "admin", "team.allotment_update", "team", "vision", {H100: 32}, {H100: 48}, "", id="an allotment edit"),
    pytest.param(lambda org: team_create(actor=org["admin"], name="speech", allotments={H100: 0}) and "speech",
                 "admin", "team.create", "team", "speech", None, {"allotments": {H100: 0}}, "", id="a new team"),
    pytest.param(lambda org: queue_update(actor=org["vision-lead"], queue_name="vision-main", quotas={H100: {"nominal": 16}}) and "vision-main",
                 "vision-lead", "queue.quota_update", "queue", "vision",
                 {f"quotas.{H100}": QUOTA_32}, {f"quotas.{H100}": {**QUOTA_32, "nominal": 16}}, "", id="a quota edit"),
    pytest.param(lambda org: queue_update(actor=org["vision-lead"], queue_name="vision-main", weight=2.0, strategy="strict_fifo") and "vision-main",
                 "vision-lead", "queue.settings_update", "queue", "vision",
                 {"weight": 1.0, "strategy": "best_effort_fifo"}, {"weight": 2.0, "strategy": "strict_fifo"}, "", id="queue settings"),
    pytest.param(lambda org: queue_create(actor=org["admin"], name="vision-extra", team_name="vision") and "vision-extra",
                 "admin", "queue.create", "queue", "vision", None,
                 {"cohort": None, "weight": 1.0, "strategy": "best_effort_fifo", "preemption_policy": "within_queue_and_reclaim"},
                 "", id="a new queue"),
    pytest.param(lambda org: str(job_cancel(user=org["vision-lead"], job_id=a_job(org).pk, reason="wrong data").pk),
                 "vision-lead", "job.cancel", "job", "vision", {"state": "pending"}, {"state": "cancelled"}, "wrong data",
                 id="a cancellation"),
    pytest.param(lambda org: str(preemption_approve(actor=org["admin"], plan_id=a_plan(org).pk, comment="deadline").pk),
                 "admin", "preemption.approve", "preemptionplan", "vision", {"status": "proposed"}, "approved", "deadline",
                 id="a preemption approval with a comment"),
    pytest.param(lambda org: str(preemption_reject(actor=org["admin"], plan_id=a_plan(org).pk).pk),
                 "admin", "preemption.reject", "preemptionplan", "vision", {"status": "proposed"}, "rejected", "",
                 id="a preemption rejection"),
    pytest.param(lambda org: high_class(org).name, "admin", "priority_class.create", "priorityclass", None, None,
                 {"value": 10, "description": "", "is_default": False, "teams": None, "max_gpus_per_team": 64}, "",
                 id="a new priority class"),
    pytest.param(lambda org: high_class(org) and priority_class_update(actor=org["admin"], name="high", max_gpus_per_team=32, teams=["vision"]).name,
                 "admin", "priority_class.update", "priorityclass", None,
                 {"teams": None, "max_gpus_per_team": 64}, {"teams": ["vision"], "max_gpus_per_team": 32}, "",
                 id="a priority class's cap and teams"),
    pytest.param(lambda org: node_cordon(actor=org["admin"], node_name="gpu-r1-n1", is_cordoned=True, comment="bad NVLink").name,
                 "admin", "node.cordon", "node", None, {"is_cordoned": False}, {"is_cordoned": True}, "bad NVLink", id="a cordon"),
    pytest.param(lambda org: node_cordon(actor=org["admin"], node_name="gpu-r1-n1", is_cordoned=True)
                 and node_cordon(actor=org["admin"], node_name="gpu-r1-n1", is_cordoned=False).name,
                 "admin", "node.uncordon", "node", None, {"is_cordoned": True}, {"is_cordoned": False}, "", id="an uncordon"),
]


@pytest.mark.parametrize("change, actor, action, target_type, team, before, after, comment", AUDITED)
def test_each_change_leaves_one_record_with_before_and_after(org, change, actor, action, target_type, team, before, after, comment):
    target_id = change(org)
    record = AuditRecord.objects.get(action=action)
    assert (record.actor, record.actor_name, record.target_type, record.target_id) == (org[actor], actor, target_type, target_id)
    assert (record.team.name if record.team else None, record.before, record.comment) == (team, before, comment)
    if isinstance(after, str):  # a decision: its status, the job it serves and its victims
        plan = PreemptionPlan.objects.get(pk=target_id)
        assert record.after == {"status": after, "job": plan.job_id, "victims": [plan.victim_rows.get().job_id]}
    else:
        assert record.after == after



REFUSED = [
    pytest.param(lambda org: team_update(actor=org["vision-lead"], team_name="vision", allotments={H100: 48}), PermissionDenied,
                 id="a lead sets an allotment"),
    pytest.param(lambda org: team_update(actor=org["admin"], team_name="vision", allotments={H100: 8}), ValidationError,
                 id="an allotment below the team's queues' nominal quota"),
    pytest.param(lambda org: queue_update(actor=org["language-lead"], queue_name="vision-main", weight=3.0), PermissionDenied,
                 id="another team's lead edits a queue"),
    pytest.param(lambda org: queue_update(actor=org["vision-lead"], queue_name="vision-main", quotas={H100: {"nominal": 99}}),
                 ValidationError, id="a quota above the allotment"),
    pytest.param(lambda org: job_cancel(user=org["language-researcher"], job_id=a_job(org).pk), PermissionDenied,
                 id="another team's researcher cancels"),
    pytest.param(lambda org: preemption_approve(actor=org["vision-lead"], plan_id=a_plan(org).pk), PermissionDenied,
                 id="a lead approves a plan"),
    pytest.param(lambda org: preemption_reject(actor=org["admin"], plan_id=a_plan(org).pk, comment="x" * 2001), ValidationError,
                 id="a comment too long"),
    pytest.param(lambda org: priority_class_create(actor=org["vision-lead"], name="mine", value=1), PermissionDenied,
                 id="a lead defines a priority class"),
    pytest.param(lambda org: priority_class_create(actor=org["admin"], name="huge", value=10**9), ValidationError,
                 id="a priority class value out of range"),
    pytest.param(lambda org: node_cordon(actor=org["vision-lead"], node_name="gpu-r1-n1", is_cordoned=True), PermissionDenied,
                 id="a lead cordons a node"),
]


@pytest.mark.parametrize("change, error", REFUSED)
def test_a_refused_change_leaves_no_record(org, change, error):
    with pytest.raises(error):
        change(org)
    assert AuditRecord.objects.count() == 0


def test_a_change_to_nothing_leaves_no_record(org):
    queue_update(actor=org["vision-lead"], queue_name="vision-main", weight=1.0, quotas={H100: {"nominal": 32}})
    team_update(actor=org["admin"], team_name="vision", allotments={H100: 32})
    node_cordon(actor=org["admin"], node_name="gpu-r1-n1", is_cordoned=False)
    assert AuditRecord.objects.count() == 0


def test_a_cancel_of_a_finished_job_is_refused_and_recorded_once(org):
    job = a_job(org)
    job_cancel(user=org["vision-researcher"], job_id=job.pk)
    with pytest.raises(ValidationError):
        job_cancel(user=org["vision-researcher"], job_id=job.pk)
    assert AuditRecord.objects.filter(action="job.cancel").count() == 1


def test_the_record_is_written_in_the_changes_transaction(org, monkeypatch):
    def fail(**_):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(AuditRecord.objects, "create", fail)
    with pytest.raises(RuntimeError):
        queue_update(actor=org["vision-lead"], queue_name="vision-main", quotas={H100: {"nominal": 16}})
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 32, "no change without its record"


def test_records_are_append_only(org):
    team_update(actor=org["admin"], team_name="vision", allotments={H100: 48})
    record = AuditRecord.objects.get()
    record.comment = "rewritten"
    with pytest.raises(AppendOnlyError):
        record.save()
    with pytest.raises(AppendOnlyError):
        record.delete()
    assert AuditRecord.objects.get().comment == ""


def test_a_record_outlives_its_team_and_actor(org):
    team_create(actor=org["admin"], name="speech")
    Team.objects.get(name="speech").delete()
    org["admin"].delete()
    record = AuditRecord.objects.get()
    assert (record.actor, record.actor_name, record.team, record.target_id) == (None, "admin", None, "speech")
