"""Why is it pending, when a hoard is in the way: the explanation names the idle jobs the core takes first, whose they
are, since when they idle and what they lose, and ranks their reclaim at its true cost."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain, explain_pending, messages
from scheduling.core.explain.facts import VictimFacts, VictimRule
from scheduling.core.model import SchedulerConfig
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0  # 02:46 UTC on the first day
HOUR = 3600.0
ASKS = SchedulerConfig(restart_overhead_s=300, idle_grace_s=600)
"""Another team's victims need an admin; a restart costs five minutes of the victim's GPUs."""
RUNS = SchedulerConfig(restart_overhead_s=300, idle_grace_s=600, cross_team_needs_approval=False)


def lender(job_id: int, node: int, *, since_s: float = HOUR, idle_for_s: float | None = None, gpus: int = 8):
    """A job of team tb's queue `b` on node b0r0n{node}, started `since_s` ago, idle for the last `idle_for_s`."""
    gang = a_gang(1, gpus).id(job_id).in_queue("b", team="tb").running_on(f"b0r0n{node}", since=NOW - since_s)
    return gang if idle_for_s is None else gang.idle_since(NOW - idle_for_s)


QUEUES = [queue("a", 16, team="ta"), queue("b", 8, team="tb")]
"""Team tb borrows a's unused quota: whatever b holds beyond 8 GPUs is a's to take back."""

HEADLINES = [
    pytest.param(
        [lender(1, 0, idle_for_s=HOUR), lender(2, 1), lender(3, 2)], a_gang(1, 8), ASKS,
        "Team ta's H100 quota is lent to 1 other team; Gangway would take 8 GPUs back from 1 idle job of team tb "
        "(idle since 01:46 UTC), losing no work, once an admin approves.",
        id="a hoard of another team is named with its team and since when, and taken once an admin approves",
    ),
    pytest.param(
        [lender(1, 0, since_s=2 * HOUR, idle_for_s=HOUR), lender(2, 1), lender(3, 2)], a_gang(1, 8), ASKS,
        "Team ta's H100 quota is lent to 1 other team; Gangway would take 8 GPUs back from 1 idle job of team tb "
        "(idle since 01:46 UTC), losing 8.0 GPU-hours of work done before it went idle, once an admin approves.",
        id="an idle job that worked before it went idle loses that work, and the headline says how much",
    ),
    pytest.param(
        [lender(1, 0, idle_for_s=HOUR), lender(2, 1, idle_for_s=2 * HOUR, since_s=2 * HOUR), lender(3, 2)], a_gang(2, 8), ASKS,
        "Team ta's H100 quota is lent to 1 other team; Gangway would take 16 GPUs back from 2 idle jobs of team tb "
        "(the longest idle since 00:46 UTC), losing no work, once an admin approves.",
        id="several hoards are counted, with the longest idle's start",
    ),
    pytest.param(
        [lender(1, 0, idle_for_s=HOUR), lender(2, 1), lender(3, 2)], a_gang(2, 8), replace(ASKS, preempt_only_when_it_pays=False),
        "Team ta's H100 quota is lent to 1 other team; Gangway can make room by taking 8 GPUs from 1 idle job of team tb "
        "(idle since 01:46 UTC) and preempting 1 working job, which needs an admin.",
        id="a plan that needs a working job too takes the hoard first and says both",
    ),
    pytest.param(
        [lender(1, 0, idle_for_s=60), lender(2, 1), lender(3, 2)], a_gang(1, 8), replace(ASKS, preempt_only_when_it_pays=False),
        "Team ta's H100 quota is lent to 1 other team; Gangway can take 8 GPUs back by preempting 1 job, which needs an admin.",
        id="a job idle for less than the grace period is not flagged, so the headline names no idle job",
    ),
]


@pytest.mark.parametrize("running, pending, config, headline", HEADLINES)
def test_the_headline_of_a_job_waiting_for_a_preemption_names_the_idle_jobs_it_takes(running, pending, config, headline):
    snap = snapshot(rack_fleet(racks=1, nodes=3), QUEUES, admitted=running, pending=[pending.id(9).in_queue("a", team="ta")],
                    now=NOW, config=config)
    result = run_admission_cycle(snap)
    assert not result.admissions
    assert explain_pending(snap, result).by_job[9].headline == headline


def test_a_plan_that_needs_no_approval_is_said_to_take_the_idle_gpus_by_itself():
    """The explanation's own plan (a job the cycle did not plan for, as behind its queue's head): the cycle's candidates."""
    running = [lender(1, 0, idle_for_s=HOUR), lender(2, 1), lender(3, 2)]
    e = direct_explanation(running, a_gang(1, 8).id(9).in_queue("a", team="ta"), RUNS)
    assert e.headline == ("Team ta's H100 quota is lent to 1 other team; Gangway will take 8 GPUs back from 1 idle job of "
                          "team tb (idle since 01:46 UTC), losing no work; no approval is needed.")


def test_the_preempt_fix_lists_each_victim_with_the_rule_that_chose_it_and_since_when_it_idles():
    running = [lender(1, 0, idle_for_s=HOUR), lender(2, 1), lender(3, 2)]
    snap = snapshot(rack_fleet(racks=1, nodes=3), QUEUES, admitted=running, pending=[a_gang(2, 8).id(9).in_queue("a", team="ta")],
                    now=NOW, config=replace(ASKS, preempt_only_when_it_pays=False))
    result = run_admission_cycle(snap)
    preempt = next(f for f in explain_pending(snap, result).by_job[9].fixes if f.action == "preempt")
    assert set(preempt.jobs) == result.preemptions[0].plan.victim_ids == {1, 2}
    assert [victim["rule"] for victim in preempt.to_dict()["victims"]] == ["idle", "reclaim"]
    idle = preempt.to_dict()["victims"][0]
    assert (idle["job"], idle["team"], idle["idle_since"], idle["lost_work_gpu_hours"]) == (1, "tb", "1970-01-01T01:46:40+00:00", 0.0)
    assert preempt.detail.startswith(
        "preempt 2 job(s) in block=b0/rack=b0r0, taking 1 idle job of team tb (idle since 01:46 UTC) and reclaiming 8 GPUs lent to b: "
        "#1 (tb, 8 GPUs, idle, 0.7 GPU-h), #2 (tb, 8 GPUs, 8.7 GPU-h)"
    )


def test_reclaiming_idle_jobs_is_offered_at_a_restart_only_and_ranks_before_requeueing_working_jobs():
    """Fragmentation blocks: moving a working job of the team's own (5 minutes since its checkpoint, and a restart) costs
    more than reclaiming another team's idle job (a restart only), so the reclaim comes first."""
    running = [
        a_gang(1, 4).id(1).in_queue("a", team="ta").checkpoints_every(600).running_on("b0r0n0", since=NOW - 500),
        a_gang(1, 4).id(2).in_queue("a", team="ta").checkpoints_every(600).running_on("b0r0n1", since=NOW - 500),
        lender(3, 2, idle_for_s=HOUR),
    ]
    snap = snapshot(rack_fleet(racks=1, nodes=3), [queue("a", 16, team="ta"), queue("b", 16, team="tb")], admitted=running,
                    pending=[a_gang(1, 8).id(9).in_queue("a", team="ta")], now=NOW, config=ASKS)
    e = explain_pending(snap, run_admission_cycle(snap)).by_job[9]
    assert e.blocking == "fit"
    assert [(f.action, round(f.cost_gpu_hours, 2)) for f in e.fixes][:3] == [("wait", 0.0), ("preempt", 0.67), ("defragment", 0.89)]
    assert e.fixes[1].detail == ("reclaim 1 idle job of team tb (idle since 01:46 UTC) in block=b0/rack=b0r0: "
                                 "#3 (tb, 8 GPUs, idle, 0.7 GPU-h); losing no work, only its restart; proposed, awaiting an "
                                 "admin's approval")


def direct_explanation(running, pending, config):
    snap = snapshot(rack_fleet(racks=1, nodes=3), QUEUES, admitted=running, pending=[pending], now=NOW, config=config)
    built = [r.build() for r in running]
    fleet = FleetState(snap.nodes, snap.topology)
    for holder in built:
        fleet.allocate_placement(holder.placement, holder)
    return explain(pending.build(), fleet, QuotaLedger(snap.queues, built), snap)


def idle(lost_work_gpu_hours: float) -> VictimFacts:
    return VictimFacts(1, "b", "tb", 8, VictimRule.IDLE, lost_work_gpu_hours + 0.67, lost_work_gpu_hours, NOW - HOUR)


@pytest.mark.parametrize("victims, with_restart, says", [
    pytest.param([idle(0.0)], True, "losing no work, only its restart", id="a job idle since its last checkpoint loses only its restart"),
    pytest.param([idle(0.01), idle(0.02)], False, "losing no work", id="seconds of work are no work worth a number"),
    pytest.param([idle(0.25), idle(1.0)], True, "losing 1.2 GPU-hours of work done before they went idle and their restart",
                 id="jobs that worked before they went idle lose that work and their restart"),
])
def test_what_idle_victims_lose_is_said_in_words(victims, with_restart, says):
    assert messages.idle_loss(victims, with_restart=with_restart) == says
