"""Request guards that run before any view: query strings with NUL characters are refused with 400."""

from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse


class RejectNulInQueryMiddleware:
    """PostgreSQL cannot compare text with a NUL character; a filter value carrying one is a 400, not a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        bad = sorted(key for key, values in request.GET.lists() if "\x00" in key or any("\x00" in v for v in values))
        if bad:
            reason = ["NUL characters (%00) are not allowed"]
            if request.path.startswith("/api/"):
                return JsonResponse({f"query.{key.replace(chr(0), '')}": reason for key in bad}, status=400)
            return HttpResponseBadRequest("NUL characters (%00) are not allowed in the query string")
        return self.get_response(request)
