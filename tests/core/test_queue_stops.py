"""Where a queue stops (core.queue_stops): the cycle's rule, and the reach the simulator and the forecast pass."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.cycle import run_admission_cycle
from scheduling.core.fairshare import sort_queue
from scheduling.core.model import QueueingStrategy, SchedulerConfig
from scheduling.core.queue_stops import strict_fifo_reach
from tests.core.builders import a_gang, queue, rack_fleet, snapshot

NOW = 10_000.0
CAPS = {"high": 16}
NO_PREEMPTION = SchedulerConfig(preemption_enabled=False)


def reach_ids(jobs, room_gpus, may_start=None):
    built = [job.build() for job in jobs]
    return [job.id for job in strict_fifo_reach(built, room_gpus=room_gpus, now=NOW, class_caps=CAPS, may_start=may_start)]


def test_the_reach_ends_with_the_job_past_which_the_jobs_need_more_than_the_room():
    jobs = [a_gang(1, 8).id(1), a_gang(1, 4).id(2), a_gang(1, 8).id(3), a_gang(1, 8).id(4)]
    assert reach_ids(jobs, room_gpus=16) == [1, 2, 3]


def test_jobs_the_cycle_passes_over_are_reached_and_take_no_room():
    backing_off = a_gang(1, 8).id(2)._with(backoff_until=NOW + 60)
    capped = a_gang(1, 8).id(3).at_class("high")
    jobs = [a_gang(1, 8).id(1), backing_off, capped, a_gang(1, 8).id(4), a_gang(1, 8).id(5)]
    assert reach_ids(jobs, room_gpus=8) == [1, 2, 3, 4]


def test_the_reach_ends_at_the_first_job_whose_shape_may_not_start():
    jobs = [a_gang(1, 8).id(1), a_gang(2, 8).id(2), a_gang(1, 8).id(3)]
    assert reach_ids(jobs, room_gpus=64, may_start=lambda job: job.gpus <= 8) == [1, 2]


strict_queue_jobs = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 4, 8, 16]),  # GPUs: one pod up to 8, whole 8-GPU pods above
        st.sampled_from([0, 0, 10]),  # priority
        st.booleans(),  # backing off
        st.sampled_from([None, None, "high"]),  # priority class (capped: 16 GPUs a team)
    ),
    min_size=1, max_size=14,
)


@settings(max_examples=150, deadline=None)
@given(jobs=strict_queue_jobs, busy_nodes=st.integers(0, 4), nominal=st.sampled_from([16, 32, 64]))
def test_a_cycle_passed_the_reach_admits_what_it_admits_passed_the_whole_queue(jobs, busy_nodes, nominal):
    nodes = rack_fleet(racks=2, nodes=3)
    running = [a_gang(1, 8).id(100 + i).in_queue("q").running_on(node.name).build() for i, node in enumerate(nodes[:busy_nodes])]
    pending = [
        replace((a_gang(gpus // 8, 8) if gpus > 8 else a_gang(1, gpus)).id(1 + k).priority(priority).submitted(k).build(),
                priority_class=priority_class, backoff_until=NOW + 60 if backing_off else None)
        for k, (gpus, priority, backing_off, priority_class) in enumerate(jobs)
    ]
    queues = [queue("q", nominal, cohort=None, strategy=QueueingStrategy.STRICT_FIFO)]
    whole = snapshot(nodes, queues, admitted=running, pending=pending, now=NOW, config=NO_PREEMPTION,
                     priority_class_caps=CAPS)
    free_gpus = sum(node.allocatable_gpus for node in nodes) - 8 * busy_nodes
    ordered = list(pending)
    sort_queue(ordered)
    reach = tuple(strict_fifo_reach(ordered, room_gpus=free_gpus, now=NOW, class_caps=CAPS))
    admitted = run_admission_cycle(whole).admissions
    assert run_admission_cycle(replace(whole, pending=reach)).admissions == admitted
