"""Template helpers for one way of showing things everywhere: times with their zone (and relative where it helps),
GPU counts with the right plural, the URLs of vendored JavaScript, and what the nav offers a reader."""

from __future__ import annotations

import datetime as dt

from django import template
from django.templatetags.static import static
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from portal.staticfinders import vendored_path
from scheduling import clock
from scheduling.permissions import can_read_audit

register = template.Library()
TIME_FORMAT = "%b %d %H:%M:%S UTC"
CLOCK_FORMAT = "%H:%M UTC"


def _moment(value) -> dt.datetime | None:
    """A datetime, an ISO 8601 string (as explanations store them) or epoch seconds, in UTC."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, tz=dt.timezone.utc)
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def _duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 60:
        return "less than a minute"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        hours, minutes = divmod(round(seconds / 60), 60)
        return f"{hours} h {minutes} min" if minutes and hours < 10 else f"{hours} h"
    return f"{round(seconds / 86400)} days"


@register.filter
def when(value) -> str:
    """`Dec 03 14:48:35 UTC` in a <time> element (the ISO value for machines)."""
    moment = _moment(value)
    if moment is None:
        return "—"
    return format_html('<time datetime="{}">{}</time>', moment.isoformat(), moment.strftime(TIME_FORMAT))


@register.filter
def relative(value, now=None) -> str:
    """`in 16 min (at 13:31 UTC)` for the future, `3 min ago (14:48 UTC)` for the past."""
    moment = _moment(value)
    if moment is None:
        return "—"
    now = _moment(now) or clock.now_datetime()
    seconds = (moment - now).total_seconds()
    wall_time = moment.strftime(CLOCK_FORMAT if abs(seconds) < 20 * 3600 else TIME_FORMAT)
    if abs(seconds) < 60:
        text = "now" if seconds >= 0 else "just now"
        return format_html('<time datetime="{}">{} ({})</time>', moment.isoformat(), text, wall_time)
    shape = "in {} (at {})" if seconds > 0 else "{} ago ({})"
    return format_html('<time datetime="{}">' + shape + "</time>", moment.isoformat(), _duration(seconds), wall_time)


@register.filter
def duration(seconds) -> str:
    return "—" if seconds in (None, "") else _duration(float(seconds)) if float(seconds) >= 60 else f"{int(float(seconds))} s"


@register.filter
def gpus(count, flavor: str = "") -> str:
    """`1 GPU`, `8 GPUs`, `1,024 H100-80GB GPUs`."""
    if count in (None, ""):
        return "—"
    number = float(count)
    text = f"{int(number):,}" if number == int(number) else f"{number:,.1f}"
    return f"{text} {flavor + ' ' if flavor else ''}GPU{'' if number == 1 else 's'}"


@register.filter
def number_cells(values) -> str:
    """`<td>1.0</td><td>-16.0</td>…`: a row of numbers as table cells, one decimal. The borrowing tables have a cell
    per queue and minute (thousands a page), which `floatformat` in a loop renders ten times slower."""
    return mark_safe("".join(f"<td>{float(value) + 0.0:.1f}</td>" for value in values))  # + 0.0: no "-0.0"


@register.filter
def history_cells(row) -> str:
    """A history row (scheduling.selectors.history.DayOfQueue) as its table cells: day, queue, admissions, wait p50 and
    p95, preemptions. A week of fifty queues is 350 rows, which the template's filters in a loop render eight times slower."""
    return format_html("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>", row.day.strftime("%b %d"),
                       row.queue, row.admissions, duration(row.p50_wait_s), duration(row.p95_wait_s), row.preemptions)


@register.filter
def plural(count, noun: str) -> str:
    """`1 job`, `3 jobs` (nouns with a plain -s plural)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


@register.filter
def subtract(value, other) -> int:
    """`held|subtract:allotted`: the GPUs beyond an allotment."""
    return int(value) - int(other)


def _flat(values, prefix: str = "") -> dict:
    """{"quotas.H100": {"nominal": 32}} → {"quotas.H100.nominal": 32}."""
    flat = {}
    for key, value in (values or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return str(value)


@register.filter
def audit_changes(record) -> list[tuple[str, str | None, str]]:
    """An audit record's change as (what, before, after) lines, only what changed: `quotas.H100-80GB.nominal`,
    `32`, `24`. A record of a creation has no before."""
    before, after = _flat(record.before), _flat(record.after)
    lines = []
    for key in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(key), after.get(key)
        if key in before and old == new:
            continue
        lines.append((key, _shown(old) if key in before else None, _shown(new) if key in after else "removed"))
    return lines


@register.filter
def reads_audit(user) -> bool:
    """Admins and team leads read the audit log (their teams' part of it): the nav shows it to them."""
    return can_read_audit(user)


@register.simple_tag
def vendor(name: str) -> str:
    return static(vendored_path(name))


@register.filter
def words(value) -> str:
    """`raise_quota` → `raise quota`: machine-readable names as people read them."""
    return str(value).replace("_", " ")
