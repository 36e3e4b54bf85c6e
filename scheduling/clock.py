"""The control plane's one clock: services, selectors and tasks take the moment from here (or are handed it), never
from time.time() or timezone.now() directly, so a test or a replay sets the time in one place (`clock_set`).

The pure core and the simulator never read a clock: they are handed `now` (the snapshot's, or virtual time)."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from typing import Callable, Iterator

_read_s: Callable[[], float] = time.time


def now_s() -> float:
    """Seconds since the epoch, from the clock in use."""
    return _read_s()


def now_datetime() -> dt.datetime:
    """The same moment as an aware UTC datetime (for model fields)."""
    return dt.datetime.fromtimestamp(_read_s(), tz=dt.timezone.utc)


def moment(now: float | None) -> float:
    """`now` when the caller named the moment, else the clock's."""
    return now_s() if now is None else now


@contextlib.contextmanager
def clock_set(read_s: Callable[[], float]) -> Iterator[None]:
    """Read the time from `read_s` inside the block (a fixed or a stepped clock in a test)."""
    global _read_s
    previous, _read_s = _read_s, read_s
    try:
        yield
    finally:
        _read_s = previous
