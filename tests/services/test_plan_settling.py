"""An open preemption plan stays the same plan while it still makes room; an approved one runs though the core
would now pick other victims (services.plans, on literal fleets), and the pass keeps its row (reconcile)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import PendingReason, PlannedPreemption, PreemptionPlan, Victim
from scheduling.services.plans import plans_settle
from scheduling.snapshots import OpenPlan
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0
ROW = 77
OWNER = 1
# Four borrowers of team "lend", two whole nodes each, fill the 64-GPU fleet: lend holds 64 of its 32 nominal.
# The later a borrower started, the less work it loses (no checkpoint yet), so the core reclaims the newest first.
BORROWERS = {11: ("b0r0n0", "b0r0n1", 550), 12: ("b0r0n2", "b0r0n3", 400), 13: ("b0r1n0", "b0r1n1", 250), 14: ("b0r1n2", "b0r1n3", 100)}


def scene(*, owner_pods: int = 2, gone: tuple[int, ...] = (), approved: dict | None = None):
    borrowers = [a_gang(2, 8).id(i).in_queue("lend").checkpoints_every(600).running_on(a, b, since=NOW - age)
                 for i, (a, b, age) in BORROWERS.items() if i not in gone]
    owner = a_gang(owner_pods, 8).id(OWNER).in_queue("own")
    return snapshot(rack_fleet(racks=2, nodes=4), [queue("own", 32), queue("lend", 32)], admitted=borrowers, pending=[owner],
                    now=NOW, approved_preemptions=approved or {})


def open_plan(victims: tuple[int, ...], *, is_approved: bool = False) -> OpenPlan:
    plan = PreemptionPlan(OWNER, tuple(Victim(v, "lend", "lend", 16, 1.0 + v / 100) for v in victims), "block=b0", PendingReason.QUOTA)
    return OpenPlan(ROW, is_approved, PlannedPreemption(plan, not is_approved, "stored-fingerprint"))


def settle(state, *open_plans: OpenPlan):
    return plans_settle(snapshot=state, decisions=run_admission_cycle(state), open_plans={p.planned.plan.job_id: p for p in open_plans})


def owners_plan(settled) -> PlannedPreemption:
    (planned,) = [p for p in settled.decisions.preemptions if p.plan.job_id == OWNER]
    return planned


def test_the_core_alone_reclaims_the_borrower_that_started_last():
    decisions = run_admission_cycle(scene())
    assert [(p.plan.victim_ids, p.needs_approval) for p in decisions.preemptions] == [({14}, True)]


@pytest.mark.parametrize("name, state, stored, kept_victims", [
    ("a plan that still makes room stands, though the core now picks another victim", scene(), (12,), {12}),
    ("a victim that finished on its own leaves the plan", scene(owner_pods=4, gone=(11,)), (11, 12), {12}),
    ("a victim no longer needed leaves the plan, the costliest spared first", scene(), (12, 13), {13}),
    ("a plan of four victims for a 32-GPU gang keeps the two cheapest", scene(owner_pods=4), (11, 12, 13, 14), {13, 14}),
])
def test_a_proposed_plan_stays_the_same_row_while_it_makes_room(name, state, stored, kept_victims):
    settled = settle(state, open_plan(stored))
    planned = owners_plan(settled)
    assert settled.rows == {OWNER: ROW}, name
    assert planned.plan.victim_ids == kept_victims and planned.needs_approval
    assert planned.fingerprint != "stored-fingerprint", "the core's fingerprint of this state goes with it"
    assert settled.decisions.admissions == ()


@pytest.mark.parametrize("name, state, stored", [
    ("every victim of the plan is gone", scene(owner_pods=4, gone=(12,)), (12,)),
    ("what is left of the plan no longer makes room for a bigger gang", scene(owner_pods=4), (12,)),
])
def test_a_proposed_plan_is_replaced_by_the_cores_when_it_no_longer_makes_room(name, state, stored):
    decisions = run_admission_cycle(state)
    settled = plans_settle(snapshot=state, decisions=decisions, open_plans={OWNER: open_plan(stored)})
    assert settled.rows == {} and settled.decisions is decisions, name


def test_an_approved_plan_runs_though_the_core_would_now_pick_another_victim():
    state = scene(approved={OWNER: frozenset({12})})
    settled = settle(state, open_plan((12,), is_approved=True))
    (admission,) = settled.decisions.admissions
    assert (admission.job_id, admission.preempted) == (OWNER, (12,))
    assert {p.node for p in admission.placement} == {"b0r0n2", "b0r0n3"}, "on the nodes its victim frees"
    assert owners_plan(settled).plan.victim_ids == {12} and not owners_plan(settled).needs_approval
    assert settled.rows == {OWNER: ROW} and OWNER not in settled.decisions.pending.by_job()


def test_an_approved_plan_whose_victims_are_gone_does_not_run():
    state = scene(owner_pods=4, gone=(12,), approved={OWNER: frozenset({12})})
    settled = settle(state, open_plan((12,), is_approved=True))
    assert settled.decisions.admissions == () and settled.rows == {} and settled.waiting == set()


def test_an_approved_plan_the_core_executed_itself_keeps_its_row():
    state = scene(approved={OWNER: frozenset({13, 14})})
    settled = settle(state, open_plan((13, 14), is_approved=True))
    (admission,) = settled.decisions.admissions
    assert admission.preempted == (14,), "the core took the part of the approved plan it needs"
    assert settled.rows == {OWNER: ROW}


def test_nothing_is_rebuilt_when_no_plan_is_open():
    decisions = run_admission_cycle(scene())
    assert plans_settle(snapshot=scene(), decisions=decisions, open_plans={}).decisions is decisions


def test_a_plan_kept_for_a_job_the_core_no_longer_plans_for_is_left_to_the_core():
    state = scene()
    decisions = replace(run_admission_cycle(state), preemptions=())
    assert plans_settle(snapshot=state, decisions=decisions, open_plans={OWNER: open_plan((12,))}).rows == {}
