"""What several pages share: the use-over-time and borrowing chart fragments, the job pager's anchor, idle GPUs per queue."""

from __future__ import annotations

from django.urls import reverse

from scheduling.selectors.borrowing import borrowing_over_time
from scheduling.selectors.usage import GROUPINGS, WINDOWS


def job_id_of(raw: str | None) -> int | None:
    """A pager link's job id; anything else starts from the newest job."""
    return int(raw) if raw and raw.isdigit() else None


def window_of(request) -> str:
    window = request.GET.get("window", "1h")
    return window if window in WINDOWS else "1h"


def usage_charts(series: list, *, url: str, window: str, by: str | None = None) -> dict:
    for index, one in enumerate(series):
        one.chart_id = f"usage-{by or 'job'}-{index}"
    return {"series": series, "url": url, "window": window, "windows": list(WINDOWS), "by": by,
            "groupings": list(GROUPINGS) if by else []}


def borrowing_charts(window: str, team: str | None = None) -> dict:
    cohorts = borrowing_over_time(window=window, team=team)
    for index, cohort in enumerate(cohorts):
        cohort.chart_id = f"borrowing-{index}"
    return {"cohorts": cohorts, "url": reverse("web:borrowing"), "window": window, "windows": list(WINDOWS), "team": team,
            "step_s": WINDOWS[window][1]}


def idle_gpus_by_queue(idle) -> dict[str, int]:
    by_queue: dict[str, int] = {}
    for allocation in idle:
        by_queue[allocation.queue] = by_queue.get(allocation.queue, 0) + allocation.gpus
    return by_queue
