"""One order of a queue's pending jobs: sort_queue's fast sorts, job_order_key, and the index order agree."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.attained import NO_SERVICE_ORDER, ServiceOrder
from scheduling.core.fairshare import job_order_key, sort_queue
from tests.core.builders import a_gang

LEVELS = (1.0, 16.0)
ORDERS = [
    NO_SERVICE_ORDER,
    ServiceOrder(LEVELS),
    # One 8-GPU job ran 900 s (7,200 GPU-s) and another 12,500 s: at these times some of them are back at level 0.
    *(ServiceOrder(LEVELS, promote_after_waiting=0.5, now=now) for now in (1_000.0, 1_400.0, 20_000.0)),
]

pending_jobs = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 5, 10]),  # priority
        st.sampled_from([0.0, 0.0, 1800.0, 7200.0, 100_000.0]),  # GPU-seconds of earlier runs
        st.sampled_from([10.0, 20.0, 30.0]),  # submit time: ties are the rule
    ),
    max_size=30,
)


def built(jobs):
    return [a_gang(1, 8).id(100 - k).priority(priority).ran_before(ran).submitted(at).build()
            for k, (priority, ran, at) in enumerate(jobs)]


@settings(max_examples=200, deadline=None)
@given(jobs=pending_jobs, service=st.sampled_from(ORDERS))
def test_sort_queue_orders_a_queue_as_its_key_does(jobs, service):
    queue = built(jobs)
    sort_queue(queue, service)
    assert [job.id for job in queue] == [job.id for job in sorted(queue, key=lambda job: job_order_key(job, service))]


@settings(max_examples=100, deadline=None)
@given(jobs=pending_jobs)
def test_without_service_levels_the_key_orders_as_the_database_index(jobs):
    queue = built(jobs)
    assert sorted(queue, key=job_order_key) == sorted(queue, key=lambda job: job.queue_order)


def test_a_job_that_ran_before_goes_behind_the_fresh_jobs_of_its_priority_only():
    ran = a_gang(1, 8).id(1).submitted(10.0).ran_before(7200.0).build()
    fresh = a_gang(1, 8).id(2).submitted(20.0).build()
    urgent_ran = a_gang(1, 8).id(3).submitted(30.0).priority(5).ran_before(100_000.0).build()
    queue = [ran, fresh, urgent_ran]
    sort_queue(queue, ServiceOrder(LEVELS))
    assert [job.id for job in queue] == [3, 2, 1]
