"""Bounded pages: every list has a maximum page size; jobs and nodes page by keyset (cursor), never COUNT(*)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from rest_framework.pagination import CursorPagination, LimitOffsetPagination

MAX_PAGE_SIZE = 500


MAX_OFFSET = 2**31 - 1
"""Beyond any list's length, and within what the database's OFFSET takes (a larger one was a 500 on PostgreSQL)."""


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`?limit` above MAX_PAGE_SIZE is answered with MAX_PAGE_SIZE rows (for the small lists: preemptions); a
    `limit` or `offset` that is not a whole number in range is a 400 naming it."""

    max_limit = MAX_PAGE_SIZE

    def get_limit(self, request):
        _whole_number(request, self.limit_query_param, minimum=1, maximum=None)
        return super().get_limit(request)

    def get_offset(self, request):
        _whole_number(request, self.offset_query_param, minimum=0, maximum=MAX_OFFSET)
        return super().get_offset(request)


def _whole_number(request, name: str, *, minimum: int, maximum: int | None) -> None:
    raw = request.query_params.get(name)
    if raw is None:
        return
    if not (raw.isascii() and raw.isdigit() and int(raw) >= minimum and (maximum is None or int(raw) <= maximum)):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"of at least {minimum}"
        raise ValidationError({name: [f"must be a whole number {bound}"]})


class KeysetPagination(CursorPagination):
    """`?cursor=` from the `next`/`previous` links and `?limit=` (at most MAX_PAGE_SIZE); no total count, so a
    page costs one index range scan however many rows the list has."""

    page_size = 100
    page_size_query_param = "limit"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request):
        _whole_number(request, self.page_size_query_param, minimum=1, maximum=None)
        return super().get_page_size(request)


class JobPagination(KeysetPagination):
    ordering = ("-submitted_at", "-id")  # the job_list_order index


class NodePagination(KeysetPagination):
    ordering = ("name",)
    page_size = 250  # ~56 KB: a page stays under 100 KB
