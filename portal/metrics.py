"""`GET /metrics`: Prometheus exposition of the control plane, for a scraper holding GANGWAY_METRICS_TOKEN."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from scheduling.selectors.metrics import GangwayCollector


@require_GET
def metrics(request):
    """`Authorization: Bearer <GANGWAY_METRICS_TOKEN>`; with no token configured the endpoint does not exist."""
    expected = settings.GANGWAY_METRICS_TOKEN
    if not expected:
        raise Http404("metrics are off: set GANGWAY_METRICS_TOKEN")
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return HttpResponse("a valid bearer token is required\n", status=401, content_type="text/plain",
                            headers={"WWW-Authenticate": "Bearer"})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GangwayCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
