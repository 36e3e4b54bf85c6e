"""Start estimates and what-if previews: the core run forward on virtual time, checked by hand and by property."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.attained import ServiceOrder
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage
from scheduling.core.model import JobState, Quota, SchedulerConfig
from scheduling.planning.forecast import INITIAL_CAP, forecast, promotion_time
from scheduling.planning.what_if import what_if
from tests.core.builders import FLAVOR, QueueingStrategy, a_gang, node, queue, rack_fleet, snapshot

NOW = 1000.0


def limited(builder, limit_s):
    return builder._with(runtime_limit_s=limit_s)


def two_busy_nodes(*, second_limit_s=3600):
    """n0 busy until 3600 (started 0, limit 3600); n1 busy until 4200 (started 600), or forever without a limit."""
    return [
        limited(a_gang(1, 8).id(1).running_on("b0r0n0", since=0.0), 3600),
        limited(a_gang(1, 8).id(2).running_on("b0r0n1", since=600.0), second_limit_s),
    ]


def test_estimates_are_exact_on_a_fleet_worked_out_by_hand():
    # At 3600 one node frees: the 2-node gang C cannot start, the 1-node job D behind it can (best-effort FIFO),
    # and runs until 4200; at 4200 both nodes are free and C starts.
    pending = [limited(a_gang(2, 8).id(10).submitted(1.0), 1800), limited(a_gang(1, 8).id(11).submitted(2.0), 600)]
    snap = snapshot(rack_fleet(racks=1, nodes=2), [queue("q", 64, cohort=None)], admitted=two_busy_nodes(), pending=pending, now=NOW)
    assert forecast(snap).starts == {10: 4200.0, 11: 3600.0}


def test_strict_fifo_keeps_the_order_in_the_estimates():
    pending = [limited(a_gang(2, 8).id(10).submitted(1.0), 1800), limited(a_gang(1, 8).id(11).submitted(2.0), 600)]
    strict = queue("q", 64, cohort=None, strategy=QueueingStrategy.STRICT_FIFO)
    snap = snapshot(rack_fleet(racks=1, nodes=2), [strict], admitted=two_busy_nodes(), pending=pending, now=NOW)
    assert forecast(snap).starts == {10: 4200.0, 11: 4200.0 + 1800}


def test_a_job_without_a_limit_holds_its_node_past_the_horizon():
    running = two_busy_nodes(second_limit_s=None)
    pending = [limited(a_gang(2, 8).id(10).submitted(1.0), 1800), limited(a_gang(1, 8).id(11).submitted(2.0), 600)]
    snap = snapshot(rack_fleet(racks=1, nodes=2), [queue("q", 64, cohort=None)], admitted=running, pending=pending, now=NOW)
    result = forecast(snap, horizon_s=24 * 3600)
    assert result.starts == {10: None, 11: 3600.0}
    assert result.wait_s(11) == 2600.0


def test_an_idle_job_holds_its_node_in_the_estimates_even_where_the_admin_suspends_idle_jobs():
    # Suspending it is the pass's business, not waiting's: the estimate keeps it until its limit, and never places
    # the 2-node gang on its node meanwhile.
    idle = limited(a_gang(1, 8).id(1).in_queue("a", team="ta").running_on("b0r0n0", since=0.0), 20_000)._with(idle_since=100.0)
    pending = [limited(a_gang(2, 8).id(2).in_queue("b", team="tb").submitted(500.0), 100),
               limited(a_gang(1, 8).id(3).in_queue("b", team="tb").submitted(600.0), 100)]
    snap = snapshot(rack_fleet(racks=1, nodes=2), [queue("a", 16, team="ta"), queue("b", 16, team="tb")], admitted=[idle],
                    pending=pending, now=NOW, config=SchedulerConfig(suspend_idle_jobs=True))
    assert forecast(snap).starts == {2: 20_000.0, 3: NOW}


def test_a_job_that_fits_now_starts_now():
    snap = snapshot(rack_fleet(racks=1, nodes=2), [queue("q", 64)], pending=[a_gang(1, 8).id(5)], now=NOW)
    assert forecast(snap).starts == {5: NOW}


def test_what_if_more_quota_starts_the_queue_earlier_and_lists_reclaimable_jobs():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [limited(a_gang(1, 8).id(i).in_queue("b", team="tb").running_on(f"b0r0n{i}", since=0.0), 7200) for i in range(2)]
    pending = [limited(a_gang(1, 8).id(20).in_queue("a", team="ta"), 3600)]
    queues = [queue("a", 0, team="ta"), queue("b", 16, team="tb")]
    snap = snapshot(nodes, queues, admitted=borrowers, pending=pending, now=NOW)
    proposed = replace(snap.queues["a"], quotas={FLAVOR: Quota(16)})
    result = what_if(snap, {"a": proposed})
    # Before: a borrows from b's quota once b's jobs end at 7200; after: within its own nominal quota, now.
    assert result.jobs == ((20, 7200.0, NOW),)
    data = result.to_dict()
    team_a = next(row for row in data["teams"] if row["team"] == "ta")
    assert team_a["before"]["mean_wait_s"] == 6200.0 and team_a["after"]["mean_wait_s"] == 0.0
    assert data["reclaimable"] == []  # b is within its own nominal quota: nothing to reclaim


def test_what_if_names_running_jobs_of_other_teams_that_become_reclaimable():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i).in_queue("b", team="tb").running_on(f"b0r0n{i}", since=0.0) for i in range(4)]
    pending = [a_gang(1, 8).id(20).in_queue("a", team="ta")]
    queues = [queue("a", 0, team="ta"), queue("b", 16, team="tb"), queue("c", 16, team="tc")]
    snap = snapshot(nodes, queues, admitted=borrowers, pending=pending, now=NOW)
    result = what_if(snap, {"a": replace(snap.queues["a"], quotas={FLAVOR: Quota(8)})})
    assert {r.job_id for r in result.reclaimable} == {0, 1, 2, 3}
    assert {r.team for r in result.reclaimable} == {"tb"}


def test_what_if_leaves_out_an_idle_borrower_which_the_core_takes_first_whatever_the_quotas_say():
    nodes = rack_fleet(racks=1, nodes=4)
    borrowers = [a_gang(1, 8).id(i).in_queue("b", team="tb").running_on(f"b0r0n{i}", since=0.0) for i in range(4)]
    borrowers[0] = borrowers[0].idle_since(NOW - 3600)
    pending = [a_gang(1, 8).id(20).in_queue("a", team="ta")]
    queues = [queue("a", 0, team="ta"), queue("b", 16, team="tb"), queue("c", 16, team="tc")]
    snap = snapshot(nodes, queues, admitted=borrowers, pending=pending, now=NOW, config=SchedulerConfig(idle_grace_s=600))
    result = what_if(snap, {"a": replace(snap.queues["a"], quotas={FLAVOR: Quota(8)})})
    assert {r.job_id for r in result.reclaimable} == {1, 2, 3}


# A strict FIFO queue of whole-node gangs, alone in waiting, on a fleet whose other jobs only run: more
# nominal quota can only start each of its jobs earlier (or as early) — by induction over the queue, the
# jobs running at any moment after the change are a subset of those running before.
def whole_node_jobs(nodes, limits, *, queue_name: str, team: str):
    """One 8-GPU job of `queue_name` on each of the first nodes, started at 0, one runtime limit each (None: none)."""
    return jobs_on_nodes(nodes, [(8, limit) for limit in limits], queue_name=queue_name, team=team)


def jobs_on_nodes(nodes, busy, *, queue_name: str, team: str):
    """One job of `queue_name` on each of the first nodes, started at 0: (GPUs, runtime limit or None) each."""
    return [
        limited(a_gang(1, gpus).id(100 + i).in_queue(queue_name, team=team).running_on(node.name, since=0.0), limit)
        for i, (node, (gpus, limit)) in enumerate(zip(nodes, busy))
    ]


gangs = st.lists(st.tuples(st.integers(1, 3), st.sampled_from([600, 1800, 3600])), min_size=1, max_size=6)
busy = st.lists(st.sampled_from([None, 900, 2400, 5000]), min_size=0, max_size=4)


@settings(max_examples=60, deadline=None)
@given(gangs=gangs, busy=busy, nominal=st.integers(8, 32), extra=st.integers(8, 32))
def test_a_what_if_that_adds_quota_never_makes_the_queues_estimates_later(gangs, busy, nominal, extra):
    nodes = rack_fleet(racks=2, nodes=2)
    running = whole_node_jobs(nodes, busy, queue_name="other", team="other")
    pending = [
        limited(a_gang(pods, 8).id(1 + k).in_queue("q").submitted(float(k)), limit) for k, (pods, limit) in enumerate(gangs)
    ]
    queues = [queue("q", nominal, cohort=None, strategy=QueueingStrategy.STRICT_FIFO), queue("other", 64, team="other", cohort=None)]
    snap = snapshot(nodes, queues, admitted=running, pending=pending, now=NOW)
    more = replace(snap.queues["q"], quotas={FLAVOR: Quota(nominal + extra)})
    result = what_if(snap, {"q": more}, horizon_s=48 * 3600)
    for job_id, before, after in result.jobs:
        if before is not None:
            assert after is not None and after <= before, (job_id, before, after)


def brute_force_starts(snap, horizon_s):
    """The forecast's definition, without its pruning: a full cycle over every waiting job at every end event,
    whenever a waiting job is promoted (SchedulerConfig.promote_after_waiting), and when its backoff ends."""
    config = replace(snap.config, preemption_enabled=False, suspend_idle_jobs=False)
    running = {job.id: job for job in snap.admitted}
    ends = {job.id: job.started_at + job.runtime_limit_s for job in snap.admitted if job.runtime_limit_s is not None}
    waiting = {job.id: job for job in snap.pending}
    service = ServiceOrder.at(config, snap.now)
    promotions = {job.id: at for job in snap.pending if (at := promotion_time(job, service)) is not None}
    starts = dict.fromkeys(waiting)
    usage = dict(snap.historical_usage)
    t = snap.now
    while True:
        for job_id in [j for j, end in ends.items() if end <= t and j in running]:
            del running[job_id]
        result = run_admission_cycle(replace(snap, now=t, admitted=tuple(running.values()), pending=tuple(waiting.values()),
                                             historical_usage=dict(usage), config=config))
        for admission in result.admissions:
            job = waiting.pop(admission.job_id)
            starts[job.id] = t
            running[job.id] = replace(job, state=JobState.RUNNING, placement=admission.placement, admitted_at=t,
                                      started_at=t, are_pods_ready=True)
            if job.runtime_limit_s is not None:
                ends[job.id] = max(t, t + job.runtime_limit_s)
        future = [end for j, end in ends.items() if j in running and end > t]
        future += [at for j, at in promotions.items() if j in waiting and at > t]
        future += [job.backoff_until for job in waiting.values()
                   if job.backoff_until is not None and job.backoff_until > t]
        if not waiting or not future or min(future) > snap.now + horizon_s:
            return starts
        step = min(future) - t
        in_use = {}
        for job in running.values():
            in_use[job.queue] = in_use.get(job.queue, 0) + job.gpus
        for name in snap.queues:
            usage[name] = decay_usage(usage.get(name, 0.0), in_use.get(name, 0), step, config.usage_half_life_s)
        t += step


# Runs of alike jobs (of one queue and shape, submitted one after another): many jobs of one (queue, shape) start at
# once, more than a cycle is passed at first (INITIAL_CAP). Half-node jobs leave no node whole: a gang its quota holds
# may then fit nowhere, and be drained for.
partly_busy = st.lists(st.tuples(st.sampled_from([4, 8]), st.sampled_from([None, 900, 2400, 5000])), max_size=4)
alike_jobs = st.fixed_dictionaries({
    "count": st.integers(1, INITIAL_CAP + 4),
    "queue": st.sampled_from(["a", "b"]),
    "pods_and_gpus": st.sampled_from([(1, 1), (1, 2), (1, 8), (2, 4), (2, 8), (3, 8)]),
    "priority": st.sampled_from([0, 10]),
    "age_s": st.sampled_from([9000.0, 2000.0, 100.0]),
    "limit_s": st.sampled_from([600, 3000, 7200]),
    # GPU-seconds of earlier runs: service levels 0, 1 and 2 under the default levels (2 and 32 GPU-hours).
    "attained_gpu_s": st.sampled_from([0.0, 0.0, 7200.0, 200_000.0]),
    "checkpoint_interval_s": st.sampled_from([None, None, 1800]),
    "is_preemptible": st.sampled_from([True, True, True, False]),
    "priority_class": st.sampled_from([None, None, "capped"]),
    "backoff_s": st.sampled_from([None, None, None, 300.0, 3000.0]),
})


def waiting_gangs(runs: list[dict]):
    """The runs' jobs, ids from 1; within a run each job submitted a second after the one before."""
    gangs = []
    for run in runs:
        pods, gpus = run["pods_and_gpus"]
        for k in range(run["count"]):
            gang = (a_gang(pods, gpus).id(1 + len(gangs)).in_queue(run["queue"], team=f"t{run['queue']}")
                    .priority(run["priority"]).submitted(NOW - run["age_s"] + k).ran_before(run["attained_gpu_s"])
                    .checkpointing(run["checkpoint_interval_s"]))
            if not run["is_preemptible"]:
                gang = gang.not_preemptible()
            if run["priority_class"] is not None:
                gang = gang.at_class(run["priority_class"])
            if run["backoff_s"] is not None:
                gang = gang._with(backoff_until=NOW + run["backoff_s"])
            gangs.append(limited(gang, run["limit_s"]))
    return gangs


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(alike_jobs, min_size=1, max_size=6), busy=partly_busy, strict=st.booleans(),
       starvation=st.sampled_from([None, 3600.0]), promote_after_waiting=st.sampled_from([None, 0.5, 4.0]),
       drains=st.booleans(), per_team=st.booleans(),
       # Team ta under-served (drains for its gangs are the likeliest), tb under-served, or no history at all.
       usage=st.sampled_from([{"a": 1_000.0, "b": 1_000_000.0}] * 2 + [{"a": 1_000_000.0, "b": 1_000.0}, {}]))
def test_the_pruned_forecast_starts_every_job_when_full_cycles_would(
    runs, busy, strict, starvation, promote_after_waiting, drains, per_team, usage
):
    nodes = rack_fleet(racks=2, nodes=2)
    running = jobs_on_nodes(nodes, busy, queue_name="b", team="tb")
    pending = waiting_gangs(runs)
    strategy = QueueingStrategy.STRICT_FIFO if strict else QueueingStrategy.BEST_EFFORT_FIFO
    # The two quotas (40 GPUs) exceed the fleet's 32: a gang a's quota holds may fit no set of nodes, and be drained
    # for (drain_for_underserved_gangs).
    queues = [queue("a", 24, team="ta", strategy=strategy), queue("b", 16, team="tb")]
    config = SchedulerConfig(starvation_after_s=starvation, promote_after_waiting=promote_after_waiting,
                             drain_for_underserved_gangs=drains, fair_share_per_team=per_team)
    snap = snapshot(nodes, queues, admitted=running, pending=pending, now=NOW, config=config, historical_usage=usage,
                    priority_class_caps={"capped": 8})
    assert forecast(snap, horizon_s=48 * 3600).starts == brute_force_starts(snap, 48 * 3600)


def one_gpu_jobs_and_then_a_wider_one(*, ahead=(), priority_class_caps=None):
    """On one node of 2c + 3 GPUs (c = INITIAL_CAP, the jobs of a shape a cycle is passed at first): c + 2 one-GPU jobs
    (ids 2…) and then a job of c + 2 GPUs (id 50), after the jobs `ahead` (id 1). The full cycle starts every one-GPU
    job, and the wider one no longer fits; a cycle passed only c of them and the one right after them has room left
    for it."""
    small = [limited(a_gang(1, 1).id(2 + k).submitted(NOW - 100 + k), 600) for k in range(INITIAL_CAP + 2)]
    wider = limited(a_gang(1, INITIAL_CAP + 2).id(50).submitted(NOW - 10), 600)
    return snapshot([node("n0", gpus=2 * INITIAL_CAP + 3)], [queue("q", 64, cohort=None)],
                    pending=[*ahead, *small, wider], now=NOW, priority_class_caps=priority_class_caps or {})


def test_more_jobs_of_one_shape_start_at_once_than_a_cycle_is_passed_and_no_job_of_another_shape_slips_in_first():
    snap = one_gpu_jobs_and_then_a_wider_one()
    starts = forecast(snap).starts
    assert starts == {**{2 + k: NOW for k in range(INITIAL_CAP + 2)}, 50: NOW + 600}
    assert starts == brute_force_starts(snap, 7 * 24 * 3600)


def passed_over_for_its_class():
    over_its_cap = limited(a_gang(1, 1).id(1).at_class("capped").submitted(NOW - 200), 600)
    return one_gpu_jobs_and_then_a_wider_one(ahead=[over_its_cap], priority_class_caps={"capped": 0})


def backing_off():
    backing_off_until_later = limited(a_gang(1, 1).id(1).submitted(NOW - 200), 600)._with(backoff_until=NOW + 300)
    return one_gpu_jobs_and_then_a_wider_one(ahead=[backing_off_until_later])


def ranked_by_a_job_of_a_shape_passed_in_part():
    """Queue a: c whole-node jobs (the first starts on n0, the rest fit nowhere), X (2 GPUs, starts on n1), another
    whole-node job W, then Y (4 GPUs). Queue b: Z (4 GPUs), submitted between W and Y. With X started, queue a ranks by
    W, ahead of Z: W cannot start, Y takes n1's last 4 GPUs and Z waits. Ranked by Y, the queue would go after Z."""
    running = [limited(a_gang(1, 2).id(100).in_queue("b", team="tb").running_on("n1", since=0.0), 10_000)]
    pending = [*(limited(a_gang(1, 8).id(1 + k).in_queue("a", team="ta").submitted(NOW - 100 + k), 600)
                 for k in range(INITIAL_CAP)),
               limited(a_gang(1, 2).id(20).in_queue("a", team="ta").submitted(NOW - 50), 600),
               limited(a_gang(1, 8).id(21).in_queue("a", team="ta").submitted(NOW - 40), 600),
               limited(a_gang(1, 4).id(22).in_queue("a", team="ta").submitted(NOW - 20), 600),
               limited(a_gang(1, 4).id(30).in_queue("b", team="tb").submitted(NOW - 30), 600)]
    queues = [queue("a", 64, team="ta", cohort=None), queue("b", 64, team="tb", cohort=None)]
    return snapshot([node("n0"), node("n1")], queues, admitted=running, pending=pending, now=NOW)


def starving_behind_its_shape():
    """Queue a: c young whole-node jobs at priority 10 (the first starts on n0, the rest fit nowhere), a 3-node gang
    that fits nowhere, then S (a whole node, priority 0, starving) and L (4 GPUs). S is refused like the rest of its
    shape and holds a reservation: L waits behind it, although n1 has its 4 GPUs."""
    running = [limited(a_gang(1, 4).id(100).in_queue("b", team="tb").running_on("n1", since=0.0), 10_000)]
    pending = [*(limited(a_gang(1, 8).id(1 + k).in_queue("a", team="ta").priority(10).submitted(NOW - 100 + k), 600)
                 for k in range(INITIAL_CAP)),
               limited(a_gang(3, 8).id(19).in_queue("a", team="ta").priority(10).submitted(NOW - 50), 600),
               limited(a_gang(1, 8).id(20).in_queue("a", team="ta").submitted(NOW - 9000), 600),
               limited(a_gang(1, 4).id(21).in_queue("a", team="ta").submitted(NOW - 10), 600)]
    queues = [queue("a", 16, team="ta", cohort=None), queue("b", 16, team="tb", cohort=None)]
    return snapshot([node("n0"), node("n1")], queues, admitted=running, pending=pending, now=NOW,
                    config=SchedulerConfig(starvation_after_s=3600.0))


def may_borrow_behind_one_that_may_not():
    """Queue b (nominal 8) holds a 2-node gang only by borrowing: the first one, not preemptible, may not (and is over
    its class's cap); the one after it may, and starts."""
    pending = [limited(a_gang(1, 1).id(1).in_queue("b", team="tb").submitted(NOW - 300), 600),
               limited(a_gang(2, 8).id(2).in_queue("b", team="tb").not_preemptible().at_class("capped")
                       .submitted(NOW - 200), 600),
               limited(a_gang(2, 8).id(3).in_queue("b", team="tb").submitted(NOW - 100), 600)]
    queues = [queue("a", 16, team="ta"), queue("b", 8, team="tb")]
    return snapshot(rack_fleet(racks=1, nodes=3), queues, pending=pending, now=NOW, priority_class_caps={"capped": 8})


def beside_one_of_its_size_that_may_not_borrow():
    """Queue b (nominal 8): 5-node gangs that fit nowhere around a 2-node gang G1 that starts by borrowing, then a
    one-pod job of 16 GPUs that fits nowhere and, not preemptible, may not borrow, then a 2-node gang G2 that could
    borrow. The core keeps the quota refusal of the 16-GPU job only for jobs of its size that may not borrow either
    (cycle.quota_failures), so G2 is not held back by it."""
    def too_wide(job_id):
        return limited(a_gang(5, 8).id(job_id).in_queue("b", team="tb").submitted(NOW - 500 + job_id), 600)
    pending = [too_wide(1),
               limited(a_gang(2, 8).id(10).in_queue("b", team="tb").submitted(NOW - 300), 600),
               too_wide(2),
               limited(a_gang(1, 16).id(20).in_queue("b", team="tb").not_preemptible().submitted(NOW - 200), 600),
               limited(a_gang(2, 8).id(11).in_queue("b", team="tb").submitted(NOW - 100), 600)]
    queues = [queue("a", 64, team="ta"), queue("b", 8, team="tb")]
    return snapshot(rack_fleet(racks=1, nodes=4), queues, pending=pending, now=NOW)


def a_waiting_job_checkpoints():
    """One node; queue a's whole-node job would borrow without checkpoints, queue b's 4-GPU job would not. A 2-node
    gang of b that checkpoints (and fits nowhere) waits in the cohort, so a's job goes last
    (SchedulerConfig.uncheckpointed_borrowers_last): b's starts first, and a's no longer fits."""
    pending = [limited(a_gang(1, 8).id(1).in_queue("a", team="ta").submitted(NOW - 400), 600),
               limited(a_gang(1, 4).id(2).in_queue("b", team="tb").submitted(NOW - 300), 600),
               limited(a_gang(2, 8).id(3).in_queue("b", team="tb").submitted(NOW - 200), 600),
               limited(a_gang(2, 8).id(4).in_queue("b", team="tb").checkpoints_every(1800).submitted(NOW - 100), 600)]
    queues = [queue("a", 4, team="ta"), queue("b", 4, team="tb")]
    return snapshot(rack_fleet(racks=1, nodes=1), queues, pending=pending, now=NOW)


@pytest.mark.parametrize("scenario", [
    pytest.param(passed_over_for_its_class,
                 id="a job of the shape over its priority class's cap does not hide that more of the shape start"),
    pytest.param(backing_off, id="a job of the shape backing off does not hide that more of the shape start"),
    pytest.param(ranked_by_a_job_of_a_shape_passed_in_part,
                 id="the job right after a started one ranks its queue though its shape was passed only in part"),
    pytest.param(starving_behind_its_shape,
                 id="a starving job further back than the jobs of its shape passed holds its queue back"),
    pytest.param(may_borrow_behind_one_that_may_not,
                 id="a job that may borrow starts though the first job of its shape may not borrow"),
    pytest.param(beside_one_of_its_size_that_may_not_borrow,
                 id="a job that fits nowhere and may not borrow does not hold back one of its size that may"),
    pytest.param(a_waiting_job_checkpoints,
                 id="a waiting job that checkpoints puts borrowers without checkpoints last though it cannot start"),
])
def test_the_forecast_admits_what_the_full_cycle_admits(scenario):
    snap = scenario()
    assert forecast(snap).starts == brute_force_starts(snap, 7 * 24 * 3600)


def test_a_starving_job_behind_a_younger_urgent_head_holds_back_the_small_job_behind_it():
    # Queue a: H (priority 10, young, 3 nodes: blocked), S (old, 2 nodes: blocked and starving), L (1 node, fits now).
    # A full cycle holds L back behind S's reservation; the pruned forecast must pass S to see that.
    running = [limited(a_gang(1, 8).id(100).in_queue("b", team="tb").running_on("b0r0n0", since=0.0), 3000),
               limited(a_gang(1, 8).id(101).in_queue("b", team="tb").running_on("b0r0n1", since=0.0), 7200)]
    pending = [
        limited(a_gang(3, 8).id(1).in_queue("a", team="ta").priority(10).submitted(NOW - 100), 600),
        limited(a_gang(2, 8).id(2).in_queue("a", team="ta").submitted(NOW - 9000), 600),
        limited(a_gang(1, 8).id(3).in_queue("a", team="ta").submitted(NOW - 50), 600),
    ]
    queues = [queue("a", 16, team="ta", cohort=None), queue("b", 16, team="tb", cohort=None)]
    snap = snapshot(rack_fleet(racks=2, nodes=2), queues, admitted=running, pending=pending, now=NOW)
    starts = forecast(snap, horizon_s=48 * 3600).starts
    assert starts == brute_force_starts(snap, 48 * 3600)
    assert starts[3] is not None and starts[3] > NOW


# R, submitted at 0, ran an hour on an 8-GPU node before (8 GPU-hours: the second service level). With
# promote_after_waiting at 0.5 it goes back to the first level once it has been pending half as long as it ran: at
# 0 + 3600 (its run) + 1800.
RAN_AN_HOUR = 8 * 3600.0
PROMOTES_AT_HALF = SchedulerConfig(promote_after_waiting=0.5)


@settings(max_examples=200, deadline=None)
@given(pods=st.integers(1, 4), gpus=st.sampled_from([1, 2, 4, 8]), submitted_at=st.floats(-1e6, 1e6),
       attained_gpu_s=st.floats(7300.0, 1e6), ratio=st.sampled_from([0.3, 0.5, 1.7, 4.0]))
def test_a_job_is_promoted_at_its_promotion_time_and_not_a_second_before(pods, gpus, submitted_at, attained_gpu_s, ratio):
    # Above 2 GPU-hours: the second service level, so the job has somewhere to be promoted from.
    job = a_gang(pods, gpus).submitted(submitted_at).ran_before(attained_gpu_s).build()
    service = ServiceOrder.at(SchedulerConfig(promote_after_waiting=ratio), submitted_at)
    at = promotion_time(job, service)
    assert replace(service, now=at).is_promoted(job)
    assert not replace(service, now=at - 1.0).is_promoted(job)


def behind_fresh_jobs():
    """R and four fresh one-node jobs of 2000 s submitted after it; the only node is busy until 2000."""
    running = [limited(a_gang(1, 8).id(1).running_on("b0r0n0", since=0.0), 2000)]
    pending = [limited(a_gang(1, 8).id(10).submitted(0.0).ran_before(RAN_AN_HOUR), 1000),
               *(limited(a_gang(1, 8).id(11 + k).submitted(100.0 * (k + 1)), 2000) for k in range(4))]
    return rack_fleet(racks=1, nodes=1), queue("q", 64, cohort=None), running, pending


def behind_a_blocked_head():
    """R behind a fresh 2-node gang at the head of a strict FIFO queue; one of the two nodes is busy until 9000."""
    running = [limited(a_gang(1, 8).id(1).running_on("b0r0n0", since=0.0), 9000)]
    pending = [limited(a_gang(2, 8).id(20).submitted(500.0), 600),
               limited(a_gang(1, 8).id(21).submitted(0.0).ran_before(RAN_AN_HOUR), 1000)]
    strict = queue("q", 64, cohort=None, strategy=QueueingStrategy.STRICT_FIFO)
    return rack_fleet(racks=1, nodes=2), strict, running, pending


@pytest.mark.parametrize("scenario, config, expected", [
    pytest.param(behind_fresh_jobs, PROMOTES_AT_HALF, {11: 2000.0, 12: 4000.0, 10: 6000.0, 13: 7000.0, 14: 9000.0},
                 id="a promoted job starts at the first end after its promotion, ahead of fresh jobs submitted later"),
    pytest.param(behind_fresh_jobs, SchedulerConfig(), {11: 2000.0, 12: 4000.0, 13: 6000.0, 14: 8000.0, 10: 10_000.0},
                 id="without promotion it waits behind every fresh job"),
    pytest.param(behind_a_blocked_head, PROMOTES_AT_HALF, {21: 5400.0, 20: 9000.0},
                 id="in a strict FIFO queue a promoted job starts at its promotion, passing the blocked head"),
    pytest.param(behind_a_blocked_head, SchedulerConfig(), {20: 9000.0, 21: 9600.0},
                 id="without promotion it waits behind the blocked head"),
])
def test_a_job_promoted_within_the_horizon_is_estimated_from_its_new_place(scenario, config, expected):
    nodes, the_queue, running, pending = scenario()
    snap = snapshot(nodes, [the_queue], admitted=running, pending=pending, now=NOW, config=config)
    starts = forecast(snap).starts
    assert starts == expected
    assert starts == brute_force_starts(snap, 7 * 24 * 3600)


# The drain scenario of tests/core/test_drain.py: a lender whose quota holds a 2-node gang while the borrower's one-GPU
# jobs keep every node partly used, and the lender has used a thousandth of what the borrower has (under-served).
DRAIN_NODES = [node(name) for name in ("a", "b", "c", "d")]
DRAIN_QUEUES = [queue("lender", 24), queue("borrower", 16)]
SHARE_USED = {"lender": 1_000.0, "borrower": 1_000_000.0}


def borrowers_pods(free_by_node: dict[str, tuple[int, float]]):
    """The borrower's one-GPU jobs filling each node but `free` GPUs, each running until `until` (ids from 1000)."""
    jobs = []
    for name, (free, until) in free_by_node.items():
        jobs += [limited(a_gang(1, 1).in_queue("borrower").running_on(name, since=0.0), until) for _ in range(8 - free)]
    return [job.id(1000 + n) for n, job in enumerate(jobs)]


NEVER_WITHIN_QUOTA = [limited(a_gang(4, 8).in_queue("lender").not_preemptible().id(k).submitted(100.0 * k), 600)
                      for k in (1, 2)]
"""Two jobs ahead of the gang in the lender's queue that may not borrow and need more than its quota: they never start,
and the gang is the third job of its queue, not its head."""


@pytest.mark.parametrize("drains, ahead, gang_starts, borrower_starts", [
    # Without a drain the borrowing job takes 4 GPUs of d at once, and the gang waits for a and b to empty at 5000.
    pytest.param(False, [], 5000.0, NOW, id="without drains a job that would borrow starts at once and the gang waits"),
    # With it the job keeps off c and d, which come whole at 3000 for the gang; it starts when a and b empty.
    pytest.param(True, [], 3000.0, 5000.0, id="a drain starts the gang earlier and the job that would borrow later"),
    pytest.param(True, NEVER_WITHIN_QUOTA, 3000.0, 5000.0,
                 id="the gang is drained for behind jobs of its queue that cannot start"),
])
def test_a_drain_for_an_under_served_gang_is_in_the_estimates(drains, ahead, gang_starts, borrower_starts):
    running = borrowers_pods({"a": (1, 5000), "b": (2, 5000), "c": (6, 2000), "d": (5, 3000)})
    gang = limited(a_gang(2, 8).in_queue("lender").id(100).submitted(500.0), 3600)
    would_borrow = limited(a_gang(1, 4).in_queue("borrower").id(7).submitted(600.0), 10_000)
    snap = snapshot(DRAIN_NODES, DRAIN_QUEUES, admitted=running, pending=[*ahead, gang, would_borrow], now=NOW,
                    config=SchedulerConfig(drain_for_underserved_gangs=drains), historical_usage=SHARE_USED)
    starts = forecast(snap).starts
    assert starts == {100: gang_starts, 7: borrower_starts, **{job.build().id: None for job in ahead}}
    assert starts == brute_force_starts(snap, 7 * 24 * 3600)
