"""Why is it pending: one literal fleet per blocking level, the facts of every level, fixes ranked by displacement."""

from __future__ import annotations

import pytest

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.explain import Explainer, explain, explain_pending, holding_after
from scheduling.core.model import Pending, PendingReason, SchedulerConfig, Taint, Toleration
from scheduling.core.placement import FleetState
from scheduling.core.quota import QuotaLedger
from tests.core.builders import FLAVOR, QueueingStrategy, a_gang, node, queue, rack_fleet, snapshot

NOW = 10_000.0
CHEAP = SchedulerConfig(restart_overhead_s=0, approval_threshold_gpu_hours=1e9)


def explained(snap, job_id):
    """The explanation the reconcile pass would store for `job_id` after running the cycle on `snap`."""
    result = run_admission_cycle(snap)
    return explain_pending(snap, result).by_job[job_id]


def test_quota_names_the_nominal_limit_with_the_numbers():
    snap = snapshot(rack_fleet(racks=1, nodes=4), [queue("q", 8, cohort=None)], pending=[a_gang(2, 8).id(7)], now=NOW)
    e = explained(snap, 7)
    assert e.blocking == "quota"
    assert (e.quota.limit, e.quota.requested, e.quota.nominal, e.quota.used, e.quota.short_by) == ("nominal", 16, 8, 0, 8)
    assert e.summary.startswith("needs 16 H100 GPUs; queue q has nominal 8, 0 in use")
    assert e.fit.fits  # the later levels' facts are still given
    assert [f.action for f in e.fixes] == ["raise_quota", "shrink"]  # waiting never helps: 16 > 8 forever
    assert e.fixes[1].detail.startswith("shrink worker to 1 pods (8 GPUs, 8 fewer)")
    assert e.never_fits
    assert e.headline == "Queue q has 8 free H100 GPUs of its 8 and this job needs 16; waiting alone will never start it."


def test_quota_lent_out_says_how_much_of_the_nominal_is_lent_and_reclaimable():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i).in_queue("b", team="tb").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(4)]
    snap = snapshot(nodes, [queue("a", 16, team="ta"), queue("b", 16, team="tb")], admitted=borrowers,
                    pending=[a_gang(1, 8).id(9).in_queue("a", team="ta")], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    e = explained(snap, 9)
    assert e.blocking == "quota" and e.quota.limit == "lent_out"
    assert e.quota.lent_out == 16 and e.quota.borrowers == (("b", 16),)
    assert "16 of it is lent out to the cohort (b borrows 16) and reclaimable by preemption" in e.quota.message


def test_quota_beyond_nominal_with_the_nominal_lent_out_says_both():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i).in_queue("b", team="tb").running_on(f"b0r0n{i}", since=NOW - 60) for i in range(3)]
    snap = snapshot(nodes, [queue("a", 16, team="ta"), queue("b", 16, team="tb")], admitted=borrowers,
                    pending=[a_gang(3, 8).id(9).in_queue("a", team="ta")], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    e = explained(snap, 9)
    assert e.blocking == "quota" and e.quota.limit == "cohort_exhausted"
    assert e.quota.lent_out == 8 and e.quota.short_by == 16
    assert e.summary == (
        "needs 24 H100 GPUs, 8 beyond queue a's nominal quota 16 (0 in use), and the cohort has 0 to lend; "
        "8 of the queue's unused nominal is lent out (b borrows 8), reclaimable only by a job that fits "
        "within nominal → 16 short now"
    )


def test_fit_with_fragmentation_enough_free_gpus_but_not_enough_whole_nodes():
    nodes = rack_fleet(racks=2, nodes=2)  # 4 nodes of 8: racks b0r0, b0r1
    small = [a_gang(1, 4).id(i + 1).in_queue("q").checkpoints_every(600).running_on(n, since=NOW - 300)
             for i, n in enumerate(["b0r0n0", "b0r0n1", "b0r1n0", "b0r1n1"])]
    snap = snapshot(nodes, [queue("q", 64)], admitted=small, pending=[a_gang(2, 8).id(9)], now=NOW, config=CHEAP)
    e = explained(snap, 9)
    assert e.blocking == "fit"
    fit = e.fit
    assert (fit.free_gpus, fit.needed_gpus, fit.whole_nodes_needed, fit.whole_free_nodes) == (16, 16, 2, 0)
    assert fit.fragmentation.is_fragmented and fit.fragmentation.scattered_gpus == 16
    assert fit.fragmentation.partly_used_nodes == 4
    assert dict(fit.fragmentation.racks) == {"block=b0/rack=b0r0": 8, "block=b0/rack=b0r1": 8}
    assert "fragmentation: 16 GPUs scattered over 4 partly used nodes" in e.summary
    defrag = next(f for f in e.fixes if f.action == "defragment")
    assert len(defrag.nodes) == 2 and len(defrag.jobs) == 2


def test_the_cycles_fit_verdict_is_the_explanations_fit_sentence_without_the_racks():
    nodes = rack_fleet(racks=2, nodes=2)
    small = [a_gang(1, 4).id(i + 1).in_queue("q").running_on(n, since=NOW - 300)
             for i, n in enumerate(["b0r0n0", "b0r0n1", "b0r1n0", "b0r1n1"])]
    snap = snapshot(nodes, [queue("q", 64)], admitted=small, pending=[a_gang(2, 8).id(9)], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    (verdict,) = run_admission_cycle(snap).pending
    assert verdict.reason is PendingReason.FIT
    assert explained(snap, 9).fit.message == f"{verdict.message} (block=b0/rack=b0r0 8, block=b0/rack=b0r1 8)"


def test_fit_inside_a_required_block_reports_the_largest_block():
    nodes = rack_fleet(blocks=2, racks=1, nodes=2)  # two blocks of 2 nodes
    snap = snapshot(nodes, [queue("q", 64)], pending=[a_gang(3, 8).id(9).requires("block")], now=NOW)
    e = explained(snap, 9)
    assert e.blocking == "fit" and not e.fit.fits
    assert e.fit.free_gpus == 32  # enough in the fleet, not in one block
    largest = e.fit.largest_domain
    assert (largest.level, largest.free_gpus, largest.whole_free_nodes) == ("block", 16, 2)
    assert "inside one block" in e.summary
    assert not e.fit.fragmentation.is_fragmented or e.fit.fragmentation.scattered_gpus == 0


def test_per_node_reasons_count_cordoned_not_ready_tainted_and_wrong_flavor_nodes():
    nodes = [
        node("busy"),
        node("cordoned", is_cordoned=True),
        node("down", is_ready=False),
        node("tainted", taints=(Taint("dedicated", "infra"),)),
        node("a100", flavor="A100"),
        node("a100-2", flavor="A100"),
    ]
    running = a_gang(1, 8).id(1).running_on("busy", since=NOW - 60)
    snap = snapshot(nodes, [queue("q", 64)], admitted=[running], pending=[a_gang(1, 8).id(9).priority(-1)], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    e = explained(snap, 9)
    assert e.blocking == "nodes"
    assert (e.nodes.total, e.nodes.eligible) == (6, 0)
    assert dict(e.nodes.reasons) == {"insufficient_gpus": 1, "cordoned": 1, "not_ready": 1, "untolerated_taint": 1, "wrong_flavor": 2}
    assert e.nodes.message == (
        "0/6 nodes are available for a 8-GPU pod: 1 have fewer than 8 free GPUs, 1 cordoned, 1 not ready, "
        "1 untolerated taint, 2 wrong flavor"
    )
    assert {"uncordon", "tolerate"} <= {f.action for f in e.fixes}
    tolerant = a_gang(1, 8).id(10).tolerates(Toleration("dedicated", "Equal", "infra"))
    snap2 = snapshot(nodes, [queue("q", 64)], admitted=[running], pending=[tolerant], now=NOW)
    assert run_admission_cycle(snap2).admissions[0].placement[0].node == "tainted"


def test_one_node_with_allocatable_below_capacity_is_named():
    nodes = [node("n1"), node("n2", allocatable_gpus=4), node("n3", allocatable_gpus=0)]
    running = a_gang(1, 8).id(1).running_on("n1", since=NOW - 60)
    snap = snapshot(nodes, [queue("q", 64)], admitted=[running], pending=[a_gang(1, 8).id(9).priority(-1)], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    e = explained(snap, 9)
    assert e.blocking == "health"
    assert [(b.name, b.capacity, b.allocatable) for b in e.health.nodes] == [("n2", 8, 4), ("n3", 8, 0)]
    assert "Ready with 0 allocatable" in e.health.nodes[1].problem
    assert e.health.missing_gpus == 12
    drain = next(f for f in e.fixes if f.action == "drain_node")
    assert drain.nodes == ("n2", "n3") and drain.needs_approval


def test_a_job_that_fits_but_waits_behind_a_strict_fifo_head_is_blocked_by_order():
    nodes = rack_fleet(racks=1, nodes=2)
    snap = snapshot(nodes, [queue("q", 64, strategy=QueueingStrategy.STRICT_FIFO)],
                    pending=[a_gang(3, 8).id(1).submitted(1.0), a_gang(1, 8).id(2).submitted(2.0)], now=NOW)
    e = explained(snap, 2)
    assert e.blocking == "order" and "strict FIFO" in e.summary
    assert explained(snap, 1).blocking == "fit"


def test_fixes_are_ranked_by_cost_and_the_preempt_fix_is_the_cores_plan():
    nodes = rack_fleet(racks=1, nodes=4)
    # Team b borrows the whole fleet: two cheap fresh jobs, two expensive old ones without checkpoints.
    running = [
        a_gang(1, 8).id(1).in_queue("b", team="tb").running_on("b0r0n0", since=NOW - 60),
        a_gang(1, 8).id(2).in_queue("b", team="tb").running_on("b0r0n1", since=NOW - 120),
        a_gang(1, 8).id(3).in_queue("b", team="tb").running_on("b0r0n2", since=NOW - 7200),
        a_gang(1, 8).id(4).in_queue("b", team="tb").running_on("b0r0n3", since=NOW - 9000),
    ]
    config = SchedulerConfig(restart_overhead_s=300, preempt_only_when_it_pays=False)  # the plan's ranking, not its value
    queues = [queue("a", 16, team="ta"), queue("b", 16, team="tb")]
    job = a_gang(2, 8).id(9).in_queue("a", team="ta")
    snap = snapshot(nodes, queues, admitted=running, pending=[job], now=NOW, config=config)
    result = run_admission_cycle(snap)
    assert not result.admissions and result.preemptions[0].needs_approval  # another team pays: waits for an admin
    e = explain_pending(snap, result).by_job[9]
    costs = [(f.cost_gpu_hours, len(f.teams_affected)) for f in e.fixes]
    assert costs == sorted(costs) and e.fixes[0].action == "wait"
    preempt = next(f for f in e.fixes if f.action == "preempt")
    plan = result.preemptions[0].plan
    assert set(preempt.jobs) == set(plan.victim_ids) == {1, 2}
    assert preempt.cost_gpu_hours == pytest.approx(plan.cost_gpu_hours)
    assert preempt.teams_affected == plan.teams_affected == ("tb",) and preempt.needs_approval

    # The same fix from a direct explain() on the state, planned by the core's plan_preemption.
    fleet = FleetState(snap.nodes, snap.topology)
    for holder in running:
        built = holder.build()
        fleet.allocate_placement(built.placement, built)
    ledger = QuotaLedger(snap.queues, [r.build() for r in running])
    direct = explain(job.build(), fleet, ledger, snap)
    explainer = Explainer(snap, fleet, ledger, snap.admitted)
    core_plan = explainer.plan(job.build(), PendingReason.QUOTA)
    direct_preempt = next(f for f in direct.fixes if f.action == "preempt")
    assert set(direct_preempt.jobs) == core_plan.victim_ids == plan.victim_ids
    assert direct_preempt.cost_gpu_hours == pytest.approx(core_plan.cost_gpu_hours)


def test_jobs_of_one_shape_share_one_explanation_and_keep_their_queue_positions():
    nodes = rack_fleet(racks=1, nodes=1)
    running = a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 60)
    pending = [a_gang(1, 8).id(10 + i).submitted(NOW - 100 + i) for i in range(50)]
    snap = snapshot(nodes, [queue("q", 64)], admitted=[running], pending=pending, now=NOW)
    out = explain_pending(snap, run_admission_cycle(snap))
    assert len({id(e) for e in out.by_job.values()}) == 1
    assert [out.position[10 + i] for i in range(3)] == [0, 1, 2]


def test_to_dict_is_the_json_of_the_issue():
    running = a_gang(1, 8).id(1).running_on("b0r0n0", since=NOW - 60)
    snap = snapshot(rack_fleet(racks=1, nodes=2), [queue("q", 64)], admitted=[running], pending=[a_gang(2, 8).id(3)], now=NOW)
    data = explained(snap, 3).to_dict()
    assert set(data) >= {"blocking", "summary", "quota", "fit", "nodes", "health", "position", "fixes"}  # the estimate is the forecast's, added when read
    assert set(data["nodes"]) >= {"total", "eligible", "reasons"}
    assert set(data["fixes"][0]) >= {"action", "cost_gpu_hours", "teams_affected", "needs_approval", "detail"}
    assert data["nodes"]["reasons"] == {"insufficient_gpus": 1} and data["blocking"] == "fit"


def test_quota_lent_to_a_non_preemptible_job_is_not_called_reclaimable():
    """Non-preemptible jobs never borrow now; one admitted before that rule may still hold lent quota."""
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i).in_queue("b", team="tb").not_preemptible().running_on(f"b0r0n{i}", since=NOW - 60)
                 for i in range(4)]
    snap = snapshot(nodes, [queue("a", 16, team="ta"), queue("b", 16, team="tb")], admitted=borrowers,
                    pending=[a_gang(1, 8).id(9).in_queue("a", team="ta")], now=NOW,
                    config=SchedulerConfig(preemption_enabled=False))
    e = explained(snap, 9)
    assert e.quota.limit == "lent_out"
    assert "but only 0 of it is reclaimable by preemption (non-preemptible jobs hold the rest)" in e.quota.message


def test_a_non_preemptible_job_beyond_nominal_is_told_it_never_borrows_and_how_to_fix_it():
    snap = snapshot(rack_fleet(racks=1, nodes=4), [queue("a", 8, team="ta"), queue("b", 16, team="tb")],
                    pending=[a_gang(2, 8).id(7).in_queue("a", team="ta").not_preemptible()], now=NOW)
    e = explained(snap, 7)
    assert (e.blocking, e.quota.limit, e.quota.cohort_can_lend) == ("quota", "not_preemptible", 0)
    assert "a non-preemptible job never borrows" in e.summary
    assert [f.action for f in e.fixes][:1] == ["raise_quota"] and "resubmit the job preemptible" in e.fixes[0].detail


def test_the_explainer_answers_on_the_cycles_final_state_as_on_one_rebuilt_from_its_decisions_and_leaves_it_as_found():
    # A fragmented fleet, a cross-team plan awaiting approval and a defragmentation fix: the explainer tries plans on
    # the state the cycle hands it (CycleResult.state_after) and must undo every one.
    nodes = rack_fleet(racks=2, nodes=2)
    running = [a_gang(1, 4).id(i + 1).in_queue("b", team="tb").checkpoints_every(600).running_on(n, since=NOW - 3000)
               for i, n in enumerate(["b0r0n0", "b0r0n1", "b0r1n0", "b0r1n1"])]
    pending = [a_gang(2, 8).id(9).in_queue("a", team="ta"), a_gang(1, 4).id(10).in_queue("a", team="ta")]
    snap = snapshot(nodes, [queue("a", 16, team="ta"), queue("b", 8, team="tb")], admitted=running, pending=pending,
                    now=NOW, config=SchedulerConfig(preempt_only_when_it_pays=False))
    result = run_admission_cycle(snap)
    fleet, ledger = result.state_after.fleet, result.state_after.ledger
    free_before, used_before = list(fleet.free), {k: v for k, v in ledger.used.items() if v}
    handed_on = {job_id: e.to_dict() for job_id, e in explain_pending(snap, result).by_job.items()}
    assert list(fleet.free) == free_before and {k: v for k, v in ledger.used.items() if v} == used_before
    holding = holding_after(snap, result)
    rebuilt = FleetState(snap.nodes, snap.topology)
    for job in holding.values():
        rebuilt.allocate_placement(job.placement, job)
    explainer = Explainer(snap, rebuilt, QuotaLedger(snap.queues, holding.values()), holding.values(),
                          protected={a.job_id for a in result.admissions}, plans=result.preemptions)
    verdicts = result.pending.by_job()
    assert handed_on.keys() == verdicts.keys() and any(e["fixes"] for e in handed_on.values())
    for job in snap.pending:
        if job.id in verdicts:
            assert explainer.explain(job, Pending(job.id, *verdicts[job.id])).to_dict() == handed_on[job.id]
