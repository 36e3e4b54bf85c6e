"""With the shared cache's Redis unreachable the rate limits lapse and the API keeps answering (no 500)."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from scheduling.livebench.server import free_port


@pytest.fixture
def unreachable_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "portal.cache.FailOpenRedisCache", "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2}}}
    yield caches["default"]
    caches["default"].close()


def test_every_cache_operation_answers_as_a_miss_while_redis_is_unreachable(unreachable_cache):
    cache = unreachable_cache
    assert cache.get("k", "default") == "default" and cache.get_many(["k"]) == {} and not cache.has_key("k")
    assert cache.add("k", 1) is False and cache.set("k", 1) is None and cache.incr("k") == 1
    assert cache.touch("k") is False and cache.delete("k") is False and cache.clear() is False


@pytest.mark.django_db
def test_the_api_answers_with_its_rate_limits_lapsed_while_the_cache_is_unreachable(org, unreachable_cache):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=org['admin'], name='t', expires_in_days=1)[1]}")

    assert client.get("/api/v1/teams/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/v1/teams/").status_code == 403  # refused, not a 500
