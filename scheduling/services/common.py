"""Helpers shared by services: validation error collection and the after-commit reconcile trigger."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from scheduling.tasks import reconcile_request


class Errors:
    """Collects field → [reason] and raises one ValidationError with all of them."""

    def __init__(self) -> None:
        self.by_field: dict[str, list[str]] = defaultdict(list)

    def add(self, field: str, reason: str) -> None:
        self.by_field[field].append(reason)

    def __bool__(self) -> bool:
        return bool(self.by_field)

    def raise_if_any(self) -> None:
        if self.by_field:
            raise ValidationError(dict(self.by_field))


def create_named(model, **values):
    """Create a row whose `name` is unique. Two creates of one name at once: the loser gets the same 400 as a
    create after the other committed (its INSERT waited on the unique index), never an IntegrityError."""
    try:
        with transaction.atomic():
            return model.objects.create(**values)
    except IntegrityError:
        if not model.objects.filter(name=values["name"]).exists():
            raise
        raise ValidationError({"name": [f"a {model._meta.verbose_name} named {values['name']!r} already exists"]}) from None


MAX_COUNT = 2**31 - 1
"""The largest GPU count, pod count or number of seconds a row holds (PostgreSQL's integer)."""
MAX_QUEUE_WEIGHT = 100.0
MAX_PRIORITY = 1_000_000
"""A priority (a job's raw one, a class's value) lies in [-MAX_PRIORITY, MAX_PRIORITY]."""
MAX_NAME_LENGTH = 63
"""Names of queues, teams, flavors, classes, pod sets and topology levels (a DNS label's length)."""
MAX_JOB_NAME_LENGTH = 200
MAX_COMMENT_LENGTH = 2000


def is_count(value) -> bool:
    """An integer (not a bool) a database integer column holds; the caller checks the lower bound."""
    return isinstance(value, int) and not isinstance(value, bool) and value <= MAX_COUNT


def comment_check(comment) -> None:
    """The comment beside an admin's decision (a preemption plan, a cordon)."""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_LENGTH:
        raise ValidationError({"comment": [f"must be a string of at most {MAX_COMMENT_LENGTH} characters"]})


def to_datetime(epoch_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_s, tz=dt.timezone.utc)


def to_epoch(moment: dt.datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _enqueue_reconcile() -> None:
    try:
        reconcile_request()
    except Exception as error:  # noqa: BLE001 - the write is kept; the periodic pass catches up once the broker is back
        logging.getLogger("scheduling").warning("could not ask for a reconcile pass: %s", error)


def reconcile_after_commit() -> None:
    """Ask for one reconcile pass once the current transaction commits (off with GANGWAY_RECONCILE_ON_WRITE=0).
    Many writes in one transaction (a seed, a bulk change) ask only once."""
    if not settings.GANGWAY_RECONCILE_ON_WRITE:
        return
    connection = transaction.get_connection()
    if connection.in_atomic_block and any(entry[1] is _enqueue_reconcile for entry in connection.run_on_commit):
        return
    transaction.on_commit(_enqueue_reconcile)
