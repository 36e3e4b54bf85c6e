"""Preempt only when it pays, and serve the least attained service first (core.payoff, core.attained)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.attained import attained_gpu_s, served_longer, service_level
from scheduling.core.cycle import run_admission_cycle
from scheduling.core.model import SchedulerConfig
from scheduling.core.payoff import checkpoint_wait_s, gain_gpu_hours, natural_wait_s, preemption_pays
from scheduling.core.preemption import displacement_cost_gpu_hours
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 100_000.0


def admitted_ids(result):
    return sorted(a.job_id for a in result.admissions)
LEVELS = (1.0, 16.0)


@pytest.mark.parametrize(
    "gpu_h, level",
    [
        pytest.param(0.0, 0, id="a job that never ran is at the first level"),
        pytest.param(0.99, 0, id="just under the first threshold is still the first level"),
        pytest.param(1.0, 1, id="reaching a threshold moves a job up one level"),
        pytest.param(200.0, 2, id="past the last threshold is the last level"),
    ],
)
def test_service_levels(gpu_h, level):
    assert service_level(gpu_h * 3600, LEVELS) == level


def test_attained_service_adds_the_current_run_of_a_running_gang_times_its_gpus():
    job = replace(a_gang(2, 8).running_on("b0r0n0", "b0r0n1", since=NOW - 1800).build(), attained_gpu_s=3600.0)
    assert attained_gpu_s(job, NOW) == 3600.0 + 16 * 1800


@pytest.mark.parametrize(
    "victim_priority, victim_ran_s, levels, expected",
    [
        pytest.param(0, 4 * 3600, LEVELS, True, id="a job that ran a whole level more is served longer"),
        pytest.param(0, 60, LEVELS, False, id="a job on the same level is not"),
        pytest.param(5, 4 * 3600, LEVELS, False, id="a higher-priority job is never a victim of attained service"),
        pytest.param(0, 4 * 3600, (), False, id="with no levels configured nobody is"),
    ],
)
def test_served_longer(victim_priority, victim_ran_s, levels, expected):
    victim = a_gang(1, 8).priority(victim_priority).running_on("b0r0n0", since=NOW - victim_ran_s).build()
    pending = a_gang(1, 8).id(2).build()
    assert served_longer(victim, pending, NOW, levels) is expected


def a_full_queue(checkpoint_s, ran_s, pending_pods=1):
    """One 8-GPU node per pod of the running jobs, all busy; one pending gang of the same queue."""
    nodes = rack_fleet(racks=1, nodes=2)
    running = [
        a_gang(1, 8).id(10 + i).checkpointing(checkpoint_s).running_on(f"b0r0n{i}", since=NOW - ran_s)
        for i in range(2)
    ]
    pending = a_gang(pending_pods, 8).id(1).submitted(NOW - 10)
    return snapshot(nodes, [queue("q", 16, cohort=None)], admitted=running, pending=[pending], now=NOW,
                    config=SchedulerConfig())


@pytest.mark.parametrize(
    "checkpoint_s, ran_s, admitted",
    [
        pytest.param(1800, 10 * 3600, [1], id="a checkpointed job that ran ten hours makes room for a fresh job"),
        pytest.param(None, 10 * 3600, [], id="the same job without checkpoints is never a victim of attained service"),
        pytest.param(1800, 600, [], id="a job on the same service level is not preempted"),
        pytest.param(1800, 3600 + 1700, [], id="just before its next checkpoint the loss is too large to pay"),
    ],
)
def test_preemption_for_attained_service_runs_only_when_it_pays(checkpoint_s, ran_s, admitted):
    result = run_admission_cycle(a_full_queue(checkpoint_s, ran_s))
    assert admitted_ids(result) == admitted


@pytest.mark.parametrize(
    "ran_s, admitted",
    [
        pytest.param(90 * 60, [], id="a one-GPU job 90 minutes into its run is not yet a victim of a fresh job"),
        pytest.param(3 * 3600, [1], id="after three hours, just checkpointed, it makes room for one"),
    ],
)
def test_the_default_first_level_is_two_gpu_hours(ran_s, admitted):
    """At one GPU-hour the one-GPU jobs that are most of Philly were stopped for their queue's newcomers after
    an hour, and the checkpointed replay waited longer (docs/simulation.md, the stop-24 sweep)."""
    nodes = rack_fleet(racks=1, nodes=1, gpus=1)
    running = a_gang(1, 1).id(10).checkpointing(1800).running_on("b0r0n0", since=NOW - ran_s)
    pending = a_gang(1, 1).id(1).submitted(NOW - 10)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 1, cohort=None)], admitted=[running], pending=[pending],
                                          now=NOW, config=SchedulerConfig()))
    assert admitted_ids(result) == admitted


TEN_HOURS = 10 * 3600
RESTART_S = SchedulerConfig().restart_overhead_s


@pytest.mark.parametrize(
    "gang_gpus, victims, expected_s",
    [
        pytest.param(8, [(8, 1800, 20 * 60)], 10 * 60,
                     id="twenty minutes unsaved on as many GPUs as the gang: it waits the ten minutes to the checkpoint"),
        pytest.param(8, [(8, 1800, 5 * 60)], None,
                     id="five minutes unsaved against a 25-minute wait: it preempts now"),
        pytest.param(64, [(8, 1800, 20 * 60)], None,
                     id="a gang eight times the victim's width loses more waiting than the victim would redo"),
        pytest.param(8, [(8, 1800, 20 * 60), (8, 1800, 5 * 60)], None,
                     id="the wait is until the last victim's checkpoint: 25 minutes are not outweighed by 25 unsaved"),
        pytest.param(8, [(8, 1800, 20 * 60), (8, 1800, 0)], 10 * 60,
                     id="a victim at its checkpoint adds nothing to wait for"),
        pytest.param(8, [(8, None, 20 * 60)], None, id="a victim without checkpoints never reaches one"),
    ],
)
def test_a_plan_waits_for_its_victims_next_checkpoints_when_their_unsaved_work_outweighs_the_wait(
    gang_gpus, victims, expected_s
):
    running = [
        a_gang(1, gpus).id(10 + i).checkpointing(interval).running_on(f"b0r0n{i}", since=NOW - TEN_HOURS - since).build()
        for i, (gpus, interval, since) in enumerate(victims)
    ]
    assert checkpoint_wait_s(a_gang(1, gang_gpus).id(1).build(), running, NOW, worth_s=RESTART_S) == expected_s


@pytest.mark.parametrize(
    "other_since_s, expected_s",
    [
        pytest.param(28 * 60, 2 * 60, id="another candidate two minutes from its checkpoint: the next cycle is then"),
        pytest.param(5 * 60, 10 * 60, id="one further from it than the victim changes nothing"),
        pytest.param(0, 10 * 60, id="one that has just checkpointed is no sooner"),
    ],
)
def test_the_wait_ends_at_the_soonest_checkpoint_among_the_candidates(other_since_s, expected_s):
    victim = a_gang(1, 8).id(10).checkpointing(1800).running_on("b0r0n0", since=NOW - TEN_HOURS - 20 * 60).build()
    other = a_gang(1, 8).id(11).checkpointing(1800).running_on("b0r0n1", since=NOW - TEN_HOURS - other_since_s).build()
    assert checkpoint_wait_s(a_gang(1, 8).id(1).build(), [victim], NOW, [victim, other], RESTART_S) == expected_s


@settings(max_examples=100, deadline=None)
@given(
    gang_gpus=st.sampled_from([1, 8, 16, 64]),
    victims=st.lists(st.tuples(st.integers(1, 8), st.floats(0, 1799)), min_size=1, max_size=4),
    others=st.lists(st.tuples(st.integers(1, 8), st.floats(0, 1799)), max_size=4),
)
def test_a_plan_waits_only_when_the_work_it_saves_outweighs_the_wait(gang_gpus, victims, others):
    def running(specs, first_id):
        return [a_gang(1, gpus).id(first_id + i).checkpointing(1800).running_on(f"b0r0n{i}", since=NOW - TEN_HOURS - since)
                .build() for i, (gpus, since) in enumerate(specs)]

    stopped, rest = running(victims, 10), running(others, 20)
    wait_s = checkpoint_wait_s(a_gang(1, gang_gpus).id(1).build(), stopped, NOW, stopped + rest, RESTART_S)
    if wait_s is not None:
        worth_waiting = [(v.gpus, since) for v in stopped if (since := (NOW - v.started_at) % 1800) >= RESTART_S]
        assert 1.0 <= wait_s <= max(1800 - since for _, since in worth_waiting)
        assert sum(gpus * since for gpus, since in worth_waiting) > gang_gpus * wait_s


@pytest.mark.parametrize(
    "behind_gpus, expected_s",
    [
        pytest.param([], 10 * 60, id="nothing queued behind the gang: it alone pays the wait"),
        pytest.param([1, 4], 10 * 60, id="a few GPUs behind it: 13 GPUs × 10 min still under 160 GPU-minutes"),
        pytest.param([8, 8], None, id="two 8-GPU jobs behind it wait too: 24 GPUs × 10 min outweigh the work saved"),
    ],
)
def test_the_wait_is_paid_by_every_job_queued_behind_the_gang(behind_gpus, expected_s):
    victim = a_gang(1, 8).id(10).checkpointing(1800).running_on("b0r0n0", since=NOW - TEN_HOURS - 20 * 60).build()
    behind = [a_gang(1, gpus).id(20 + i).build() for i, gpus in enumerate(behind_gpus)]
    assert checkpoint_wait_s(a_gang(1, 8).id(1).build(), [victim], NOW, [victim], RESTART_S, behind) == expected_s


def test_work_since_a_checkpoint_shorter_than_a_restart_is_not_waited_for():
    """Else a reconciler on a beat chases checkpoints: the victim it waited for is a few seconds past its checkpoint
    at the next pass, and another candidate's is a few seconds away."""
    victim = a_gang(1, 8).id(10).checkpointing(1800).running_on("b0r0n0", since=NOW - TEN_HOURS - 4 * 60).build()
    other = a_gang(1, 8).id(11).checkpointing(1800).running_on("b0r0n1", since=NOW - TEN_HOURS - 29 * 60).build()
    gang = a_gang(1, 8).id(1).build()
    assert checkpoint_wait_s(gang, [victim], NOW, [victim, other], RESTART_S) is None
    assert checkpoint_wait_s(gang, [victim], NOW, [victim, other], worth_s=0.0) == 60


def test_an_idle_victim_is_not_waited_for():
    victim = a_gang(1, 8).id(10).checkpointing(1800).running_on("b0r0n0", since=NOW - TEN_HOURS - 1200).idle_since(NOW - 60)
    assert checkpoint_wait_s(a_gang(1, 8).id(1).build(), [victim.build()], NOW) is None


@pytest.mark.parametrize(
    "victim_priority, preempt_at_checkpoints, admitted, recheck_at",
    [
        pytest.param(0, None, [], NOW + 600,
                     id="by default an attained-service plan within the gang's own queue waits for the victim's checkpoint"),
        pytest.param(0, "all", [], NOW + 600, id="with every plan waiting it waits too"),
        pytest.param(0, "never", [1], None, id="with the rule off it preempts at once"),
        pytest.param(-1, "all", [1], None, id="a preemption by priority never waits: it is the users' stated intent"),
    ],
)
def test_the_cycle_puts_a_plan_off_until_its_victims_checkpoint(victim_priority, preempt_at_checkpoints, admitted,
                                                                recheck_at):
    nodes = rack_fleet(racks=1, nodes=1)
    victim = a_gang(1, 8).id(10).priority(victim_priority).checkpointing(1800).running_on(
        "b0r0n0", since=NOW - TEN_HOURS - 20 * 60)
    pending = a_gang(1, 8).id(1).submitted(NOW - 10)
    config = SchedulerConfig() if preempt_at_checkpoints is None else SchedulerConfig(
        preempt_at_checkpoints=preempt_at_checkpoints)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 8, cohort=None)], admitted=[victim], pending=[pending],
                                          now=NOW, config=config))
    assert (admitted_ids(result), result.recheck_at) == (admitted, recheck_at)
    if not admitted:
        message = next(p.message for p in result.pending if p.job_id == 1)
        assert "it waits about 10 min, until a job it may preempt checkpoints" in message
        assert result.preemptions == ()


@pytest.mark.parametrize(
    "preempt_at_checkpoints, admitted, recheck_at",
    [
        pytest.param(None, [1], None, id="by default a reclaim of lent quota runs at once, as in Kueue"),
        pytest.param("all", [], NOW + 600, id="with every plan waiting the owner waits for the borrower's checkpoint"),
    ],
)
def test_a_reclaim_from_another_queue_waits_for_a_checkpoint_only_when_every_plan_does(preempt_at_checkpoints, admitted,
                                                                                     recheck_at):
    borrower = a_gang(1, 8).id(10).in_queue("b", team="tb").checkpointing(1800).running_on(
        "b0r0n0", since=NOW - TEN_HOURS - 20 * 60)
    owner = a_gang(1, 8).id(1).in_queue("q", team="tq").submitted(NOW - 10)
    config = SchedulerConfig(cross_team_needs_approval=False) if preempt_at_checkpoints is None else SchedulerConfig(
        cross_team_needs_approval=False, preempt_at_checkpoints=preempt_at_checkpoints)
    result = run_admission_cycle(snapshot(rack_fleet(racks=1, nodes=1), [queue("q", 8, team="tq"), queue("b", 0, team="tb")],
                                          admitted=[borrower], pending=[owner], now=NOW, config=config))
    assert (admitted_ids(result), result.recheck_at) == (admitted, recheck_at)


def test_a_misspelt_choice_of_which_plans_wait_names_the_valid_ones():
    with pytest.raises(ValueError, match="preempt_at_checkpoints must be one of never, own_queue, all, not 'own-queue'"):
        SchedulerConfig(preempt_at_checkpoints="own-queue")


def test_a_refused_plan_says_it_does_not_pay():
    result = run_admission_cycle(a_full_queue(1800, 3600 + 1700))
    message = next(p.message for p in result.pending if p.job_id == 1)
    assert "it does not pay" in message


def test_jobs_that_ran_before_wait_behind_fresh_ones_of_their_queue():
    nodes = rack_fleet(racks=1, nodes=1)
    # 20 GPU-hours on 8 GPUs is 9,000 s run; pending 100 s since, far from SchedulerConfig.promote_after_waiting.
    ran_long = replace(a_gang(1, 8).id(1).submitted(NOW - 9_100).build(), attained_gpu_s=20 * 3600.0)
    fresh = a_gang(1, 8).id(2).submitted(2)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 8, cohort=None)], pending=[ran_long, fresh], now=NOW,
                                          config=SchedulerConfig()))
    assert admitted_ids(result) == [2]


@settings(max_examples=60, deadline=None)
@given(
    victims=st.lists(
        st.tuples(st.integers(1, 8), st.floats(0, 50 * 3600), st.sampled_from([None, 600, 1800, 3600])),
        min_size=1, max_size=4,
    ),
    gang_pods=st.integers(1, 2),
    margin=st.sampled_from([1.0, 3.0]),
)
def test_a_preemption_is_only_planned_when_its_cost_is_below_its_gain(victims, gang_pods, margin):
    """Whatever the running jobs, every plan the cycle executes costs less than the gang gains."""
    nodes = rack_fleet(racks=1, nodes=4)
    running = []
    for i, (gpus, ran_s, checkpoint_s) in enumerate(victims):
        running.append(a_gang(1, gpus).id(10 + i).checkpointing(checkpoint_s).running_on(f"b0r0n{i}", since=NOW - ran_s))
    pending = a_gang(gang_pods, 8).id(1).submitted(NOW - 10)
    config = SchedulerConfig(payoff_margin=margin)
    result = run_admission_cycle(snapshot(nodes, [queue("q", 8 * gang_pods, cohort=None)], admitted=running,
                                          pending=[pending], now=NOW, config=config))
    by_id = {job.build().id: job.build() for job in running}
    for admission in result.admissions:
        if admission.preempted:
            stopped = [by_id[v] for v in admission.preempted]
            cost = sum(displacement_cost_gpu_hours(v, NOW, config.restart_overhead_s) for v in stopped)
            assert margin * cost < gain_gpu_hours(pending.build(), stopped, NOW)
    for planned in result.preemptions:
        stopped = [by_id[v.job_id] for v in planned.plan.victims]
        assert preemption_pays(planned.plan, pending.build(), stopped, NOW, margin)


def test_the_explanation_names_the_jobs_with_less_attained_service_a_job_waits_behind():
    from scheduling.core.explain import explain_pending

    nodes = rack_fleet(racks=1, nodes=1)
    busy = a_gang(1, 8).id(9).checkpointing(None).running_on("b0r0n0", since=NOW - 60)
    # 20 GPU-hours on 8 GPUs is 9,000 s run; pending 100 s since, far from SchedulerConfig.promote_after_waiting.
    ran_long = replace(a_gang(1, 8).id(1).submitted(NOW - 9_100).build(), attained_gpu_s=20 * 3600.0)
    fresh = [a_gang(1, 8).id(i).submitted(i) for i in (2, 3, 4)]
    snap = snapshot(nodes, [queue("q", 8, cohort=None)], admitted=[busy], pending=[ran_long, *fresh], now=NOW,
                    config=SchedulerConfig())
    explanations = explain_pending(snap, run_admission_cycle(snap))
    assert "waits behind 3 jobs of its queue with less attained service" in explanations.by_job[1].summary
    assert explanations.by_job[2].attained_service == ""


@pytest.mark.parametrize(
    "config, key, starts",
    [
        pytest.param(SchedulerConfig(), "order", "least attained service first", id="the default orders by attained service"),
        pytest.param(SchedulerConfig(service_levels_gpu_h=()), "order", "priority, then FIFO", id="without levels it is FIFO"),
        pytest.param(SchedulerConfig(), "preemption", "only when it pays", id="the default weighs every plan"),
        pytest.param(SchedulerConfig(preemption_enabled=False), "preemption", "off", id="preemption can be off"),
        pytest.param(SchedulerConfig(), "starvation_reservations", "off", id="reservations are off by default"),
        pytest.param(SchedulerConfig(), "defragmentation", "off", id="defragmentation is off by default"),
        pytest.param(SchedulerConfig(defragment_for_owed_gangs=True), "defragmentation", "a gang its own nominal quota holds",
                     id="an admin can have gangs owed their quota defragmented for"),
    ],
)
def test_the_policy_in_force_reads_as_words(config, key, starts):
    from scheduling.core.policy import policy_in_force

    assert policy_in_force(config)[key].startswith(starts)


@pytest.mark.parametrize("preempt_at_checkpoints, named", [
    ("all", "a plan that pays waits for a checkpoint"),
    ("own_queue", "a plan within the gang's own queue that pays waits for a checkpoint"),
    ("never", None),
])
def test_the_policy_in_force_says_which_plans_wait_for_a_checkpoint(preempt_at_checkpoints, named):
    from scheduling.core.policy import policy_in_force

    text = policy_in_force(SchedulerConfig(preempt_at_checkpoints=preempt_at_checkpoints))["preemption"]
    assert (named in text) if named else ("waits for a checkpoint" not in text)


@pytest.mark.parametrize(
    "lacking, runs_s, expected",
    [
        pytest.param(0, [], 0.0, id="a gang that lacks nothing waits for nothing"),
        pytest.param(8, [(8, 300), (8, 7200)], 300, id="the youngest job is taken to end first"),
        pytest.param(12, [(8, 300), (8, 7200)], 7200, id="a gang lacking more waits until enough have ended"),
        pytest.param(24, [(8, 300), (8, 7200)], math.inf, id="more than all holders hold never comes back"),
    ],
)
def test_natural_wait(lacking, runs_s, expected):
    holders = [a_gang(1, gpus).id(10 + i).running_on(f"b0r0n{i}", since=NOW - ran).build()
               for i, (gpus, ran) in enumerate(runs_s)]
    assert natural_wait_s(lacking, holders, NOW) == expected


def a_fleet_with_one_long_run(checkpoint_s, others_ran_s, *, runs_in="borrower"):
    """Eight 8-GPU nodes, all of them the owner's quota: four run jobs of `runs_in` (another queue, which
    borrows them, or the owner's own), one that ran ten hours and three that ran `others_ran_s`; the
    owner's fresh 40-GPU gang lacks one node."""
    nodes = rack_fleet(racks=1, nodes=8)
    long_run = (a_gang(1, 8).id(10).in_queue(runs_in).checkpointing(checkpoint_s)
                .running_on("b0r0n0", since=NOW - 10 * 3600))
    others = [a_gang(1, 8).id(11 + i).in_queue(runs_in).checkpointing(checkpoint_s)
              .running_on(f"b0r0n{1 + i}", since=NOW - others_ran_s) for i in range(3)]
    pending = a_gang(5, 8).id(1).in_queue("owner").submitted(NOW - 10)
    # A ten-hour run costs more than the approval threshold: approvals are another test's subject.
    config = SchedulerConfig(approval_threshold_gpu_hours=1000.0, cross_team_needs_approval=False)
    return snapshot(nodes, [queue("owner", 64), queue("borrower", 0)], admitted=[long_run, *others],
                    pending=[pending], now=NOW, config=config)


@pytest.mark.parametrize(
    "checkpoint_s, others_ran_s, admitted, says",
    [
        pytest.param(None, 300, [], "it does not pay",
                     id="a long uncheckpointed run is not thrown away when young jobs will free the GPUs soon"),
        pytest.param(None, 120, [], "should come back on their own within about 2 min",
                     id="when no plan could pay the cycle does not plan and says the GPUs come back soon"),
        pytest.param(None, 10 * 3600, [1], "",
                     id="when every other job has run as long the same uncheckpointed plan pays"),
        pytest.param(1800, 300, [1], "",
                     id="a checkpointed long run makes room for the fresh gang whatever the fleet frees"),
    ],
)
def test_a_victim_without_checkpoints_is_weighed_against_the_wait_the_fleet_would_end_anyway(
    checkpoint_s, others_ran_s, admitted, says
):
    result = run_admission_cycle(a_fleet_with_one_long_run(checkpoint_s, others_ran_s))
    assert admitted_ids(result) == admitted
    if says:
        assert says in next(p.message for p in result.pending if p.job_id == 1)


@pytest.mark.parametrize(
    "checkpoint_s, admitted",
    [
        pytest.param(None, [], id="a long run of the same queue without checkpoints is not stopped for attained service"),
        pytest.param(1800, [1], id="the same run with checkpoints makes room for the fresh gang"),
    ],
)
def test_attained_service_preempts_only_jobs_that_checkpoint(checkpoint_s, admitted):
    """A whole run thrown away for a guess about durations is the loss the suite measured: the gang waits
    instead, though the same plan on borrowed GPUs would pay (the test above)."""
    result = run_admission_cycle(a_fleet_with_one_long_run(checkpoint_s, 10 * 3600, runs_in="owner"))
    assert admitted_ids(result) == admitted
