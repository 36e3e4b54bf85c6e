"""Why-pending for people: the first sentence is the conclusion in plain words; fixes include changes to the
request the job alone pays for (a smaller gang, no topology requirement, another flavor), each checked on the fleet."""

from __future__ import annotations

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import explain_pending
from dataclasses import replace

from scheduling.core.model import Quota, SchedulerConfig
from tests.core.builders import FLAVOR, a_gang, node, queue, rack_fleet, snapshot

NOW = 10_000.0


def explained(snap, job_id):
    return explain_pending(snap, run_admission_cycle(snap)).by_job[job_id]


def test_a_lent_out_quota_says_to_how_many_teams_and_what_an_admin_can_take_back():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i + 1).in_queue(f"b{i % 2}", team=f"t{i % 2}").running_on(f"b0r0n{i}", since=NOW - 60)
                 for i in range(4)]
    snap = snapshot(nodes, [queue("a", 32, team="ta"), queue("b0", 0, team="t0"), queue("b1", 0, team="t1")],
                    admitted=borrowers, pending=[a_gang(2, 8).id(9).in_queue("a", team="ta")], now=NOW,
                    config=SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=0,
                                           preempt_only_when_it_pays=False))  # (their minute of work would not pay)
    e = explained(snap, 9)
    assert e.blocking == "quota" and e.quota.limit == "lent_out"
    assert e.headline == ("Team ta's H100 quota is lent to 2 other teams; Gangway can take 16 GPUs back by preempting "
                          "2 jobs, which needs an admin.")
    assert e.summary not in e.headline  # the arithmetic stays in the levels, not in the first sentence


def test_a_gang_too_wide_for_one_rack_may_drop_the_requirement_or_shrink_and_says_who_pays():
    nodes = rack_fleet(racks=2, nodes=2)  # two racks of two 8-GPU nodes
    snap = snapshot(nodes, [queue("q", 64)], pending=[a_gang(3, 8).id(9).requires("rack")], now=NOW)
    e = explained(snap, 9)
    assert e.blocking == "fit"
    assert e.headline == ("No single rack has room for the gang: it needs 24 GPUs in one rack, the roomiest has 16 free; "
                          "waiting alone will never start it.")
    fixes = {f.action: f for f in e.fixes}
    assert {"relax_topology", "shrink"} <= set(fixes)
    assert "the job pays with slower links" in fixes["relax_topology"].detail
    assert fixes["shrink"].detail.startswith("shrink worker to 2 pods (16 GPUs, 8 fewer)")
    assert all(f.teams_affected == () and f.cost_gpu_hours == 0 for f in (fixes["relax_topology"], fixes["shrink"]))


def test_another_flavor_with_quota_and_room_is_offered():
    nodes = [*rack_fleet(racks=1, nodes=2), node("a100-0", flavor="A100"), node("a100-1", flavor="A100")]
    busy = [a_gang(1, 8).id(i + 1).running_on(f"b0r0n{i}", since=NOW - 60) for i in range(2)]
    two_flavors = replace(queue("q", 64, cohort=None), quotas={FLAVOR: Quota(64), "A100": Quota(16)})
    snap = snapshot(nodes, [two_flavors], admitted=busy, pending=[a_gang(2, 8).id(9)], now=NOW)
    e = explained(snap, 9)
    assert e.blocking == "fit"
    assert [f.detail for f in e.fixes if f.action == "other_flavor"] == [
        "resubmit on A100: queue q has quota and the fleet has room for the whole gang there now"]
