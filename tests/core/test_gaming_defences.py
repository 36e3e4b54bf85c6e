"""The defences against gaming the scheduler, each on tiny literal clusters (the replay that measures them is
`simulate --scenario gaming`, tests/simulation/test_gaming.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.accounts import FairShareAccounts, account_weight
from scheduling.core.borrowed import is_at_risk
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage
from scheduling.core.idle import is_flagged_idle
from scheduling.core.model import SchedulerConfig
from scheduling.core.preemption import displacement_cost_gpu_hours
from scheduling.core.quota import QuotaLedger
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 100_000.0
GRACE_S = 600.0
EXECUTES = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=1e9, cross_team_needs_approval=False,
                           idle_grace_s=GRACE_S)
"""The default value rule stays on: plans must pay, except those the defences exempt."""


def on(node: int, job_id: int, queue_name: str, *, since_s: float = 7200, idle_for_s: float | None = None, gpus: int = 8):
    """A running job of `gpus` GPUs on node b0r0n{node}, started `since_s` ago, idle for the last `idle_for_s`."""
    gang = a_gang(1, gpus).id(job_id).in_queue(queue_name).running_on(f"b0r0n{node}", since=NOW - since_s)
    return gang._with(idle_since=None if idle_for_s is None else NOW - idle_for_s)


def victims(queues, running, pending, nodes: int = 3, config=EXECUTES):
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=nodes), queues, admitted=running, pending=[pending],
                                          now=NOW, config=config))
    plans = [p.plan for p in result.preemptions]
    return tuple(sorted(plans[0].victim_ids)) if plans else None


# --- idle allocations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("idle_for_s, flagged", [
    pytest.param(None, False, id="a job in use is not flagged"),
    pytest.param(GRACE_S - 1, False, id="a job idle for less than the grace period is not flagged"),
    pytest.param(GRACE_S, True, id="a job idle for the grace period is flagged"),
    pytest.param(-3600, False, id="a job whose work ends in the future (the simulator knows it) is not flagged yet"),
])
def test_idle_flag(idle_for_s, flagged):
    job = on(0, 1, "q", idle_for_s=idle_for_s).build()
    assert is_flagged_idle(job, NOW, GRACE_S) is flagged


IDLE_VICTIMS = [
    pytest.param(
        [queue("owner", 16), queue("a", 8)],
        [on(0, 1, "a", idle_for_s=3600), on(1, 2, "owner", since_s=60), on(2, 3, "a", since_s=60)],
        a_gang(1, 8).id(9).in_queue("owner"), (1,),
        id="an idle job of a team within its nominal quota is taken for a job that would borrow",
    ),
    pytest.param(
        [queue("owner", 8), queue("a", 16)],
        [on(0, 1, "a", since_s=60), on(1, 2, "a", idle_for_s=3600, since_s=36000), on(2, 3, "a", since_s=30)],
        a_gang(1, 8).id(9).in_queue("owner"), (2,),
        id="reclaim takes the idle borrower first though a busy one is cheaper and more recent",
    ),
    pytest.param(
        [queue("owner", 8), queue("a", 16)],
        [on(0, 1, "a", since_s=60), on(1, 2, "a", idle_for_s=GRACE_S / 2, since_s=36000), on(2, 3, "a", since_s=30)],
        a_gang(1, 8).id(9).in_queue("owner"), None,
        id="within its grace period an idle job is an ordinary candidate, and no plan pays for a ten-hour run",
    ),
    pytest.param(
        [queue("q", 24)],
        [on(0, 1, "q", idle_for_s=3600).priority(10), on(1, 2, "q"), on(2, 3, "q")],
        a_gang(1, 8).id(9).in_queue("q").priority(0), (1,),
        id="an idle job of the preemptor's own queue is taken whatever its priority",
    ),
    pytest.param(
        [queue("owner", 8), queue("other", 16, cohort="elsewhere")],
        [on(0, 1, "other", idle_for_s=3600), on(1, 2, "owner"), on(2, 3, "other")],
        a_gang(1, 8).id(9).in_queue("owner"), None,
        id="an idle job of another cohort is not taken",
    ),
]


@pytest.mark.parametrize("queues, running, pending, expected", IDLE_VICTIMS)
def test_idle_jobs_are_the_first_victims(queues, running, pending, expected):
    assert victims(queues, running, pending) == expected


@pytest.mark.parametrize("idle_for_s, cost_gpu_hours", [
    pytest.param(None, 8 * 2.0, id="a busy job without checkpoints loses its two hours"),
    pytest.param(3600, 8 * 1.0, id="a job idle for the last hour loses the hour it worked"),
    pytest.param(7200, 0.0, id="a job idle since its start loses nothing"),
])
def test_idle_time_is_no_work_in_the_displacement_cost(idle_for_s, cost_gpu_hours):
    job = on(0, 1, "q", since_s=7200, idle_for_s=idle_for_s).build()
    assert displacement_cost_gpu_hours(job, NOW, 0.0) == pytest.approx(cost_gpu_hours)


# --- fair share: GPU-hours, and one account per team -----------------------------------------------------------


def test_usage_counts_gpu_seconds_held_so_eight_pieces_weigh_what_one_wide_job_weighs():
    one_wide = decay_usage(0.0, 64, 3600.0, 7 * 86400.0)
    assert sum(decay_usage(0.0, 8, 3600.0, 7 * 86400.0) for _ in range(8)) == pytest.approx(one_wide)


ONE_QUEUE = [queue("t", 32), queue("u", 64)]
TWO_QUEUES = [queue("t-1", 16, team="t"), queue("t-2", 16, team="t"), queue("u", 64)]


@pytest.mark.parametrize("queues, holding, share", [
    pytest.param(ONE_QUEUE, [("t", 64)], 32 / 96, id="one wide job borrowing 32"),
    pytest.param(ONE_QUEUE, [("t", 8)] * 8, 32 / 96, id="the same GPUs as eight pieces: the same share"),
    pytest.param(TWO_QUEUES, [("t-1", 32), ("t-2", 32)], 32 / 96, id="the same GPUs over two queues of the team: the same share"),
])
def test_a_teams_dominant_share_depends_on_its_gpus_not_on_how_it_cut_its_jobs_or_queues(queues, holding, share):
    queues = {q.name: q for q in queues}
    jobs = [a_gang(1, gpus).in_queue(name, team="t").build() for name, gpus in holding]
    ledger = QuotaLedger(queues, jobs)
    assert FairShareAccounts(queues, {}).share("t", ledger) == pytest.approx(share)


@pytest.mark.parametrize("weights_and_nominals, weight", [
    pytest.param([(1.0, 32)], 1.0, id="one queue: its weight"),
    pytest.param([(1.0, 8)] * 4, 1.0, id="four queues of weight 1: still 1, not 4"),
    pytest.param([(4.0, 8), (1.0, 24)], 1.75, id="weights averaged over the nominal quota"),
    pytest.param([(2.0, 0), (4.0, 0)], 3.0, id="queues without quota: the plain mean"),
])
def test_an_accounts_weight_is_its_queues_weights_averaged_never_summed(weights_and_nominals, weight):
    members = [replace(queue(f"t-{k}", nominal, team="t"), weight=w) for k, (w, nominal) in enumerate(weights_and_nominals)]
    assert account_weight(members) == pytest.approx(weight)


def admitted_teams(queues, pending, usage, config=EXECUTES, gpus: int = 16):
    """Which teams' jobs one cycle admits on `gpus` free GPUs, given the queues' decayed usage."""
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=gpus // 8), queues, pending=pending, now=NOW,
                                          historical_usage=usage, config=config))
    team_of = {job.id: job.team for job in (p.build() for p in pending)}
    return sorted(team_of[a.job_id] for a in result.admissions)


def test_more_queues_are_not_more_weight():
    """Team t cut its 32 GPUs of quota into four queues of 8 and puts a 16-GPU job in each; u has 32 in one queue and
    three 16-GPU jobs. Per queue, each of t's jobs borrows only 8 and its queue still looks light, so t takes the
    whole fleet; as one account, t's first job makes the team a borrower and u's jobs go next. (Every job checkpoints,
    so borrowing without checkpoints does not decide the order.)"""
    queues = [queue(f"t-{k}", 8, team="t") for k in range(4)] + [queue("u", 32)]
    pending = [a_gang(2, 8).in_queue(f"t-{k}", team="t").checkpointing(1800).submitted(1.0) for k in range(4)]
    pending += [a_gang(2, 8).in_queue("u").checkpointing(1800).submitted(2.0 + k) for k in range(3)]
    assert admitted_teams(queues, pending, {}, gpus=48) == ["t", "u", "u"]
    per_queue = replace(EXECUTES, fair_share_per_team=False)
    assert admitted_teams(queues, pending, {}, config=per_queue, gpus=48) == ["t", "t", "t"]


def test_a_teams_history_is_summed_over_its_queues_against_its_whole_entitlement():
    queues = [queue(f"t-{k}", 8, team="t") for k in range(4)] + [queue("u", 32)]
    accounts = FairShareAccounts({q.name: q for q in queues}, {f"t-{k}": 1000.0 for k in range(4)} | {"u": 1500.0})
    assert (accounts.weighted_history("t"), accounts.weighted_history("u")) == (4000.0 / 32, 1500.0 / 32)


def test_one_team_with_one_queue_orders_as_before():
    queues = [queue("t", 32), queue("u", 32)]
    pending = [a_gang(1, 8).in_queue("t").submitted(1.0 + k) for k in range(3)] + [a_gang(1, 8).in_queue("u").submitted(5.0)]
    usage = {"t": 100.0, "u": 50.0}
    assert admitted_teams(queues, pending, usage) == admitted_teams(queues, pending, usage, config=replace(EXECUTES, fair_share_per_team=False))


# --- the admin's policy: suspend idle jobs while others wait ---------------------------------------------------

SUSPENDS = replace(EXECUTES, suspend_idle_jobs=True)


@pytest.mark.parametrize("config, running, pending, suspended", [
    pytest.param(SUSPENDS, [on(0, 1, "a", idle_for_s=3600)], [a_gang(1, 8).id(9).in_queue("b")], [1],
                 id="a flagged idle job is suspended while a job of its cohort waits"),
    pytest.param(SUSPENDS, [on(0, 1, "a", idle_for_s=3600)], [], [],
                 id="nobody waits: it keeps its GPUs"),
    pytest.param(SUSPENDS, [on(0, 1, "a", idle_for_s=60)], [a_gang(1, 8).id(9).in_queue("b")], [],
                 id="within its grace period it is not suspended"),
    pytest.param(SUSPENDS, [on(0, 1, "a", idle_for_s=3600)], [a_gang(1, 8).id(9).in_queue("elsewhere")], [],
                 id="a job waiting in another cohort does not suspend it"),
    pytest.param(EXECUTES, [on(0, 1, "a", idle_for_s=3600)], [a_gang(1, 8).id(9).in_queue("b")], [],
                 id="without the admin's policy nothing is suspended"),
])
def test_idle_suspension(config, running, pending, suspended):
    queues = [queue("a", 8), queue("b", 8), queue("elsewhere", 8, cohort="other")]
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=3), queues, admitted=running, pending=pending,
                                          now=NOW, config=config))
    assert [e.job_id for e in result.evictions] == suspended
    assert all("suspended: idle for 60 min" in e.message for e in result.evictions)


# --- squatting: long uncheckpointed jobs on borrowed quota -----------------------------------------------------

@pytest.mark.parametrize("since_s, checkpoint_s, after_s, expected", [
    pytest.param(3 * 3600, None, 7200.0, (1,), id="a borrower without checkpoints for three hours is reclaimed at its cost"),
    pytest.param(3600, None, 7200.0, None, id="one that borrowed for an hour is weighed, and losing the hour does not pay"),
    pytest.param(3 * 3600, None, None, None, id="with the rule off, the three-hour run shields it"),
])
def test_a_squatter_cannot_shield_borrowed_quota_with_a_long_uncheckpointed_run(since_s, checkpoint_s, after_s, expected):
    config = replace(EXECUTES, reclaim_at_cost_after_s=after_s)
    running = [on(0, 1, "a", since_s=since_s, gpus=8).checkpointing(checkpoint_s), on(1, 2, "a", since_s=since_s)]
    pending = a_gang(1, 8).id(9).in_queue("owner").submitted(NOW - 30)
    assert victims([queue("owner", 8), queue("a", 8)], running, pending, nodes=2, config=config) == expected


LENT_LAST_OFF = replace(EXECUTES, uncheckpointed_borrowers_last=False)


@pytest.mark.parametrize("first, second, config, admitted", [
    pytest.param((8, None), (8, 1800), EXECUTES, "b", id="a borrower without checkpoints goes after a later one that checkpoints"),
    pytest.param((8, None), (8, None), EXECUTES, "a", id="two borrowers without checkpoints keep their order"),
    pytest.param((8, None), (4, None), EXECUTES, "a",
                 id="with no checkpointing job waiting, a borrower keeps its place before a later job within its quota"),
    pytest.param((8, 1800), (8, None), EXECUTES, "a", id="a checkpointing borrower keeps its place"),
    pytest.param((4, None), (8, 1800), EXECUTES, "a", id="a job within its quota keeps its place without checkpoints"),
    pytest.param((8, None), (8, 1800), LENT_LAST_OFF, "a", id="with the rule off, fair share and age alone"),
])
def test_lent_gpus_go_first_to_jobs_that_can_give_them_back_cheaply(first, second, config, admitted):
    """Queues a and b own 4 GPUs each of one 8-GPU node; a's job came first. Only one of the two jobs fits."""
    (first_gpus, first_checkpoint), (second_gpus, second_checkpoint) = first, second
    pending = [a_gang(1, first_gpus).in_queue("a").checkpointing(first_checkpoint).submitted(1.0),
               a_gang(1, second_gpus).in_queue("b").checkpointing(second_checkpoint).submitted(2.0)]
    assert admitted_teams([queue("a", 4), queue("b", 4)], pending, {}, config=config, gpus=8) == [admitted]


def test_the_explanation_says_why_lent_gpus_went_to_another_queue_first():
    from scheduling.core.explain import explain_pending

    squatter = a_gang(1, 8).id(1).in_queue("a").checkpointing(None).submitted(1.0)
    checkpointing = a_gang(1, 8).id(2).in_queue("b").checkpointing(1800).submitted(2.0)
    snap = snapshot(rack_fleet(racks=1, nodes=1), [queue("a", 4), queue("b", 4)], pending=[squatter, checkpointing],
                    now=NOW, config=EXECUTES)
    explanations = explain_pending(snap, run_admission_cycle(snap))
    assert "would borrow without checkpoints, so lent GPUs go first" in explanations.by_job[1].summary
    nothing_lent = replace(snap, pending=(squatter.build(),))  # the node is free, the cohort lends, it starts
    held = replace(nothing_lent, admitted=(a_gang(1, 8).in_queue("b").running_on("b0r0n0", since=NOW - 60).build(),))
    assert "lent GPUs go first" not in explain_pending(held, run_admission_cycle(held)).by_job[1].summary


@pytest.mark.parametrize("is_borrowing, checkpoint_s, running_s, at_risk", [
    pytest.param(True, None, 7200, True, id="borrowing, no checkpoints, two hours: at risk"),
    pytest.param(True, 600, 7200, False, id="checkpointing: not at risk"),
    pytest.param(False, None, 7200, False, id="within its nominal quota: not at risk"),
    pytest.param(True, None, 60, False, id="just started: not yet"),
])
def test_at_risk_marking(is_borrowing, checkpoint_s, running_s, at_risk):
    assert is_at_risk(is_borrowing=is_borrowing, checkpoint_interval_s=checkpoint_s, running_s=running_s, after_s=7200) is at_risk


@pytest.mark.parametrize("config, key, starts", [
    pytest.param(SchedulerConfig(), "fair_share", "one account per team", id="accounts are per team by default"),
    pytest.param(SchedulerConfig(fair_share_per_team=False), "fair_share", "per queue", id="or per queue"),
    pytest.param(SchedulerConfig(), "idle_allocations", "a job below the idle threshold for 600 s", id="the idle rule"),
    pytest.param(SchedulerConfig(reclaim_at_cost_after_s=None, uncheckpointed_borrowers_last=False),
                 "borrowed_without_checkpoints", "off", id="squatting rules off"),
    pytest.param(SchedulerConfig(reclaim_at_cost_after_s=7200.0, uncheckpointed_borrowers_last=False),
                 "borrowed_without_checkpoints", "a job on borrowed quota without checkpoints for 7200 s", id="reclaim at cost"),
])
def test_the_fleet_page_names_the_defences_in_force(config, key, starts):
    from scheduling.core.policy import policy_in_force

    assert policy_in_force(config)[key].startswith(starts)


def test_the_fleet_page_says_lent_gpus_go_first_to_jobs_that_can_give_them_back_cheaply():
    from scheduling.core.policy import policy_in_force

    rule = "a queue whose next job would borrow without checkpoints goes after all others"
    assert policy_in_force(SchedulerConfig())["borrowed_without_checkpoints"].startswith(rule)
    assert rule not in policy_in_force(SchedulerConfig(uncheckpointed_borrowers_last=False))["borrowed_without_checkpoints"]
