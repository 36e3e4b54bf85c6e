"""Bounded pages: every list has a maximum page size; jobs and nodes page by keyset (cursor), never COUNT(*)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from rest_framework.pagination import CursorPagination, LimitOffsetPagination

MAX_PAGE_SIZE = 500


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`?limit` above MAX_PAGE_SIZE is answered with MAX_PAGE_SIZE rows (for the small lists: preemptions)."""

    max_limit = MAX_PAGE_SIZE


class KeysetPagination(CursorPagination):
    """`?cursor=` from the `next`/`previous` links and `?limit=` (at most MAX_PAGE_SIZE); no total count, so a
    page costs one index range scan however many rows the list has."""

    page_size = 100
    page_size_query_param = "limit"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isdigit() and int(raw) > 0):
            raise ValidationError({"limit": [f"must be a whole number between 1 and {MAX_PAGE_SIZE}"]})
        return super().get_page_size(request)


class JobPagination(KeysetPagination):
    ordering = ("-submitted_at", "-id")  # the job_list_order index


class NodePagination(KeysetPagination):
    ordering = ("name",)
    page_size = 250  # ~56 KB: a page stays under 100 KB
