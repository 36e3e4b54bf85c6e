"""A mean over seeds with its 95 % confidence interval: how far a replayed ratio can be trusted.

A replay under contention is chaotic: a job one minute late reshuffles who gets the next whole node, and one seed's
ratio of mean waits (a strategy's run over the honest run of the same trace) moves by several per cent whatever anyone
does. The seeds are the independent replicates; the interval is Student's t over their values. Pairing each run with
the honest run of its own seed (the same jobs, the same trace) is what keeps that spread to a few per cent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
"""Student's t, two-sided 95 %, for 1–20 degrees of freedom (more seeds use the last: slightly wide)."""


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    """The 95 % interval; unbounded with fewer than two values or a value that is not finite."""

    def is_above(self, bound: float) -> bool:
        """The whole interval lies above `bound`."""
        return self.low > bound

    def is_below(self, bound: float) -> bool:
        return self.high < bound


def estimate(values: Sequence[float]) -> Estimate:
    mean = sum(values) / len(values)
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return Estimate(mean, -math.inf, math.inf)
    half = T_975[min(len(values) - 1, len(T_975)) - 1] * statistics.stdev(values) / math.sqrt(len(values))
    return Estimate(mean, mean - half, mean + half)
