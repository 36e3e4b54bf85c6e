"""Use is GPU-seconds used ÷ GPU-seconds allocated over the same window: never above 100 %, whatever the samples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.usage.rollup import job_uses, use_percent, use_series

PERIOD_S = 60.0
utilisation = st.floats(min_value=-5.0, max_value=150.0, allow_nan=False)  # sources do report nonsense
collection = st.dictionaries(
    st.integers(min_value=1, max_value=6),
    st.tuples(st.integers(min_value=0, max_value=64), st.lists(utilisation, max_size=80)),  # (held GPUs, samples)
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=500), collection), max_size=30),
       st.sampled_from([60.0, 900.0, 3600.0]))
def test_use_never_exceeds_allocation_in_any_bin_or_over_the_window(rounds, step_s):
    rows = []
    for minute, jobs in rounds:
        uses = job_uses({job: held for job, (held, _) in jobs.items()}, {job: utils for job, (_, utils) in jobs.items()})
        for use in uses:
            assert 0.0 <= use.used_gpus <= use.allocated_gpus
            rows.append((minute * PERIOD_S, use.allocated_gpus * PERIOD_S, use.used_gpus * PERIOD_S))

    points = use_series(rows, since_s=0.0, until_s=501 * PERIOD_S, step_s=step_s)

    assert all(p.used_gpus <= p.allocated_gpus and (p.use_percent is None or 0.0 <= p.use_percent <= 100.0) for p in points)
    total = use_percent(sum(r[2] for r in rows), sum(r[1] for r in rows))
    assert total is None or 0.0 <= total <= 100.0


def test_a_held_job_without_samples_used_nothing_and_a_job_holding_nothing_is_left_out():
    uses = job_uses({1: 8, 2: 0}, {2: [90.0]})
    assert [(u.job_id, u.allocated_gpus, u.used_gpus) for u in uses] == [(1, 8, 0.0)]


def test_bins_without_rows_are_zero_so_a_chart_shows_the_gap():
    points = use_series([(0.0, 480.0, 240.0), (180.0, 480.0, 480.0)], since_s=0.0, until_s=240.0, step_s=60.0)
    assert [(p.allocated_gpus, p.used_gpus, p.use_percent) for p in points] == [
        (8.0, 4.0, 50.0), (0.0, 0.0, None), (0.0, 0.0, None), (8.0, 8.0, 100.0)]
