"""Start estimates and what-if previews: the core run forward on virtual time, checked by hand and by property."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import decay_usage
from scheduling.core.model import JobState, Quota, SchedulerConfig
from scheduling.planning.forecast import forecast
from scheduling.planning.what_if import what_if
from tests.core.builders import FLAVOR, QueueingStrategy, a_gang, queue, rack_fleet, snapshot

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
    return [
        limited(a_gang(1, 8).id(100 + i).in_queue(queue_name, team=team).running_on(node.name, since=0.0), limit)
        for i, (node, limit) in enumerate(zip(nodes, limits))
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
    """The forecast's definition, without its pruning: a full cycle over every waiting job at every end event."""
    config = replace(snap.config, preemption_enabled=False, suspend_idle_jobs=False)
    running = {job.id: job for job in snap.admitted}
    ends = {job.id: job.started_at + job.runtime_limit_s for job in snap.admitted if job.runtime_limit_s is not None}
    waiting = {job.id: job for job in snap.pending}
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
        if not waiting or not future or min(future) > snap.now + horizon_s:
            return starts
        step = min(future) - t
        in_use = {}
        for job in running.values():
            in_use[job.queue] = in_use.get(job.queue, 0) + job.gpus
        for name in snap.queues:
            usage[name] = decay_usage(usage.get(name, 0.0), in_use.get(name, 0), step, config.usage_half_life_s)
        t += step


jobs_of_two_queues = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 4), st.sampled_from([4, 8]), st.sampled_from([0, 10]),
              st.sampled_from([-9000.0, -2000.0, -100.0]), st.sampled_from([600, 3000, 7200]),
              # GPU-seconds of earlier runs: service levels 0, 1 and 2 under the default levels (2 and 32 GPU-hours).
              st.sampled_from([0.0, 0.0, 7200.0, 200_000.0])),
    min_size=1, max_size=12,
    # At most two jobs per (queue, shape): the forecast passes two of each at first, so it runs full cycles.
    unique_by=lambda job: job[:4],
)


@settings(max_examples=100, deadline=None)
@given(jobs=jobs_of_two_queues, busy=busy, strict=st.booleans(), starvation=st.sampled_from([None, 3600.0]))
def test_the_pruned_forecast_starts_every_job_when_full_cycles_would(jobs, busy, strict, starvation):
    nodes = rack_fleet(racks=2, nodes=2)
    running = whole_node_jobs(nodes, busy, queue_name="b", team="tb")
    pending = [
        limited(a_gang(pods, gpus).id(1 + k).in_queue(name, team=f"t{name}").priority(priority).submitted(NOW + age)
                .ran_before(attained_gpu_s), limit)
        for k, (name, pods, gpus, priority, age, limit, attained_gpu_s) in enumerate(jobs)
    ]
    strategy = QueueingStrategy.STRICT_FIFO if strict else QueueingStrategy.BEST_EFFORT_FIFO
    queues = [queue("a", 16, team="ta", strategy=strategy), queue("b", 16, team="tb")]
    snap = snapshot(nodes, queues, admitted=running, pending=pending, now=NOW,
                    config=SchedulerConfig(starvation_after_s=starvation))
    assert forecast(snap, horizon_s=48 * 3600).starts == brute_force_starts(snap, 48 * 3600)


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
