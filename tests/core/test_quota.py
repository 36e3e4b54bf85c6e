"""Quota and cohort semantics, case by case (Kueue's borrowing and lending rules)."""

import pytest

from scheduling.core.model import Quota
from scheduling.core.quota import QuotaLedger, QuotaLimit
from tests.core.builders import FLAVOR, a_gang, queue


def ledger(queues, running=()):
    return QuotaLedger({q.name: q for q in queues}, [j.build() for j in running])


def on(queue_name, gpus):
    return a_gang(1, gpus).in_queue(queue_name).running_on("x")


CASES = [
    pytest.param(
        [queue("a", 16)], [], ("a", 16), (True, False, ""),
        id="a job within unused nominal quota fits without borrowing",
    ),
    pytest.param(
        [queue("a", 16, cohort=None)], [], ("a", 24), (False, True, QuotaLimit.NOMINAL),
        id="a queue without a cohort never exceeds its nominal quota",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16)], [], ("a", 24), (True, True, ""),
        id="a queue borrows what its cohort mates leave unused",
    ),
    pytest.param(
        [queue("a", 16, borrowing_limit=4), queue("b", 16)], [], ("a", 24), (False, True, QuotaLimit.BORROWING_LIMIT),
        id="borrowing stops at the borrowing limit",
    ),
    pytest.param(
        [queue("a", 16, borrowing_limit=8), queue("b", 16)], [], ("a", 24), (True, True, ""),
        id="borrowing up to exactly the borrowing limit fits",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16, lending_limit=4)], [], ("a", 21), (False, True, QuotaLimit.COHORT_EXHAUSTED),
        id="a lending limit caps what the cohort may borrow",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16, lending_limit=4)], [], ("a", 20), (True, True, ""),
        id="borrowing exactly the lending limit fits",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16, lending_limit=4)], [("a", 20)], ("b", 12), (True, False, ""),
        id="the part above the lending limit stays the owner's while others borrow",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16)], [("a", 32)], ("b", 8), (False, False, QuotaLimit.LENT_OUT),
        id="nominal quota lent to a borrower is reported as reclaimable",
    ),
    pytest.param(
        [queue("a", 16), queue("b", 16), queue("c", 8, cohort="other")], [], ("a", 40), (False, True, QuotaLimit.COHORT_EXHAUSTED),
        id="queues of another cohort lend nothing",
    ),
]


@pytest.mark.parametrize("queues, running, request_, expected", CASES)
def test_quota_check(queues, running, request_, expected):
    book = ledger(queues, [on(name, gpus) for name, gpus in running])
    name, gpus = request_
    check = book.check(a_gang(1, gpus).in_queue(name).build())
    assert (check.fits, check.is_borrowing, check.limit) == expected


def test_a_queue_without_quota_for_the_flavor_cannot_run_it():
    book = ledger([queue("a", 16)])
    job = a_gang(1, 8).in_queue("a").build()
    check = book.check(_flavor(job, "A100"))
    assert (check.fits, check.limit) == (False, QuotaLimit.NO_QUOTA)


def _flavor(job, flavor):
    from dataclasses import replace

    return replace(job, flavor=flavor)


def test_the_message_carries_the_numbers():
    book = ledger([queue("a", 256, borrowing_limit=0), queue("b", 256)], [on("a", 200)])
    check = book.check(a_gang(1, 512).in_queue("a").build())
    assert check.short_by == 456
    assert check.message("a") == (
        f"needs 512 {FLAVOR} GPUs; queue a has nominal 256, 200 in use, borrowing limit 0, cohort can lend 256 "
        "→ 456 short (borrowing limit)"
    )


def test_releasing_a_job_returns_its_quota_to_the_pool():
    queues = [queue("a", 16), queue("b", 16)]
    job = on("a", 32).build()
    book = ledger(queues, [])
    book.add(job)
    assert not book.check(a_gang(1, 8).in_queue("b").build()).fits
    book.remove(job)
    assert book.check(a_gang(1, 32).in_queue("b").build()).fits


def test_quota_defaults_lend_everything():
    assert Quota(10).lending_limit is None and Quota(10).borrowing_limit is None


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        pytest.param(16, (True, False, ""), id="a non-preemptible job fits within its queue's nominal quota"),
        pytest.param(24, (False, True, QuotaLimit.NOT_PREEMPTIBLE), id="a non-preemptible job never borrows, though the cohort lends"),
    ],
)
def test_a_non_preemptible_job_runs_only_within_nominal_quota(gpus, expected):
    book = ledger([queue("a", 16), queue("b", 16)])

    check = book.check(a_gang(1, gpus).in_queue("a").not_preemptible().build())

    assert (check.fits, check.is_borrowing, check.limit) == expected
    if not check.fits:
        assert (check.cohort_can_lend, check.room) == (0, 16)
        assert "a non-preemptible job never borrows" in check.message("a")
