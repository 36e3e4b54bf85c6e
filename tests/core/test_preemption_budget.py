"""The planning budget cannot starve: a head whose plan awaits an admin keeps it without planning again."""

import math
from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import PendingReason, SchedulerConfig
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0
TEAMS = 50
BUDGET = 8
CONFIG = SchedulerConfig(
    restart_overhead_s=0, approval_threshold_gpu_hours=1e9, max_preemption_plans_per_cycle=BUDGET, preempt_only_when_it_pays=False
)


def blocked_cohorts(teams: int):
    """Each team's queue alone in a cohort with a borrower of another team that holds its nominal quota:
    every head needs a cross-team reclaim, which waits for an admin."""
    nodes = rack_fleet(racks=teams, nodes=1)
    queues, borrowers, heads = [], [], []
    for i in range(teams):
        queues += [queue(f"own{i:02d}", 8, cohort=f"c{i:02d}"), queue(f"lend{i:02d}", 0, cohort=f"c{i:02d}")]
        borrowers.append(a_gang(1, 8).id(1000 + i).in_queue(f"lend{i:02d}").running_on(f"b0r{i}n0", since=NOW - 60))
        heads.append(a_gang(1, 8).id(i + 1).in_queue(f"own{i:02d}"))
    return nodes, queues, borrowers, heads


def passes(state, awaiting_for, *, cycles: int, config=CONFIG):
    """Run `cycles` passes, each handed the plans the last one left awaiting (as the reconciler does);
    yield each pass's result and the plans it made (not kept)."""
    nodes, queues, borrowers, heads = state
    awaiting = {}
    for k in range(cycles):
        result = run_admission_cycle(snapshot(
            nodes, queues, admitted=awaiting_for(k, borrowers), pending=heads, now=NOW + k, config=config,
            awaiting_plans=awaiting,
        ))
        made = [p for p in result.preemptions if awaiting.get(p.plan.job_id) is not p]
        yield result, made
        awaiting = {p.plan.job_id: p for p in result.preemptions if p.needs_approval}


def unchanged(_k, borrowers):
    return borrowers


def test_fifty_blocked_queues_with_a_budget_of_eight_each_get_a_plan_within_seven_cycles():
    cycles = math.ceil(TEAMS / BUDGET)
    planned: set[int] = set()
    for result, made in passes(blocked_cohorts(TEAMS), unchanged, cycles=cycles):
        assert len(made) <= BUDGET
        planned |= {p.plan.job_id for p in result.preemptions}
    assert planned == set(range(1, TEAMS + 1))
    # The last pass still proposes every plan (kept, not superseded), each awaiting approval.
    assert len(result.preemptions) == TEAMS and all(p.needs_approval for p in result.preemptions)
    assert {p.reason for p in result.pending} == {PendingReason.AWAITING_APPROVAL}


def test_a_kept_plan_is_proposed_again_as_it_was_made():
    results = [result for result, _ in passes(blocked_cohorts(2), unchanged, cycles=2)]
    assert results[1].preemptions == results[0].preemptions


def test_a_head_whose_state_changed_plans_again():
    def borrower_restarts(k, borrowers):
        # In the second pass team 0's borrower is another job: the plan it was made on is gone.
        return [replace(borrowers[0].build(), id=2000)] + borrowers[1:] if k else borrowers

    runs = list(passes(blocked_cohorts(2), borrower_restarts, cycles=2))
    (_, made_first), (second, made_second) = runs
    assert len(made_first) == 2
    assert [p.plan.job_id for p in made_second] == [1]
    assert {p.plan.job_id: p.plan.victim_ids for p in second.preemptions} == {1: {2000}, 2: {1001}}


@pytest.mark.parametrize("change, replans", [
    pytest.param({}, False, id="a plan awaiting approval on an unchanged state is kept"),
    pytest.param({"cross_team_needs_approval": False}, True, id="a plan that no longer needs approval is planned again and runs"),
])
def test_a_kept_plan_still_needs_approval(change, replans):
    first, _ = next(passes(blocked_cohorts(1), unchanged, cycles=1))
    nodes, queues, borrowers, heads = blocked_cohorts(1)
    result = run_admission_cycle(snapshot(
        nodes, queues, admitted=borrowers, pending=heads, now=NOW + 1, config=replace(CONFIG, **change),
        awaiting_plans={p.plan.job_id: p for p in first.preemptions},
    ))
    assert (result.preemptions[0] is not first.preemptions[0]) is replans
    assert bool(result.admissions) is replans
