"""Means over seeds and their 95 % intervals."""

from __future__ import annotations

import math

import pytest

from scheduling.simulation.confidence import estimate


@pytest.mark.parametrize(
    ("values", "mean", "half_width"),
    [
        pytest.param([1.0, 1.1, 0.9, 1.0], 1.0, 3.182 * 0.08165 / 2, id="four seeds use t with three degrees of freedom"),
        pytest.param([1.2, 1.2], 1.2, 0.0, id="seeds that agree give a point"),
        pytest.param([1.0] * 30, 1.0, 0.0, id="more seeds than the table use its last row"),
    ],
)
def test_the_interval_is_students_t_over_the_seeds(values, mean, half_width):
    e = estimate(values)
    assert e.mean == pytest.approx(mean)
    assert (e.high - e.mean, e.mean - e.low) == (pytest.approx(half_width, rel=1e-3, abs=1e-12),) * 2


@pytest.mark.parametrize(
    "values",
    [pytest.param([1.05], id="one seed"), pytest.param([1.0, math.inf], id="a ratio to a zero wait")],
)
def test_an_interval_that_cannot_be_known_is_unbounded(values):
    e = estimate(values)
    assert (e.low, e.high) == (-math.inf, math.inf)
