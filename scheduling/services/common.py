"""Helpers shared by services: validation error collection and the after-commit reconcile trigger."""

from __future__ import annotations

import datetime as dt
import logging
import re
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


NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def validate_name(errors: Errors, field: str, name) -> None:
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.add(field, "must be 1–63 lowercase letters, digits or '-', starting and ending with a letter or digit")


def validate_new_name(errors: Errors, model, name) -> None:
    """A valid name (validate_name) that no row of `model` has yet."""
    validate_name(errors, "name", name)
    if isinstance(name, str) and model.objects.filter(name=name).exists():
        errors.add("name", _name_taken(model, name))


def create_named(model, **values):
    """Create a row whose `name` is unique. Two creates of one name at once: the loser gets the same 400 as a
    create after the other committed (its INSERT waited on the unique index), never an IntegrityError."""
    try:
        with transaction.atomic():
            return model.objects.create(**values)
    except IntegrityError:
        if not model.objects.filter(name=values["name"]).exists():
            raise
        raise ValidationError({"name": [_name_taken(model, values["name"])]}) from None


def _name_taken(model, name: str) -> str:
    return f"a {model._meta.verbose_name} named {name!r} already exists"


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
