"""API authentication: named knox tokens that record their last use, and a per-IP limit on bad tokens."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from rest_framework import exceptions

LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
"""`last_used_at` is written at most this often per token, not on every request."""


class NamedTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <token>`. After GANGWAY_BAD_TOKENS_PER_MINUTE failures from one address in a minute,
    that address gets 429 before any token is checked (guessing tokens is throttled, not just refused)."""

    def authenticate(self, request):
        key = f"gangway:bad-tokens:{request.META.get('REMOTE_ADDR', '')}"
        if cache.get(key, 0) >= settings.GANGWAY_BAD_TOKENS_PER_MINUTE:
            raise exceptions.Throttled(wait=60, detail="too many invalid tokens from this address; try again later")
        try:
            result = super().authenticate(request)
        except exceptions.AuthenticationFailed:
            cache.add(key, 0, timeout=60)
            cache.incr(key)
            raise
        if result is not None:
            _record_use(result[1])
        return result


def _record_use(token) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


class NamedTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes the token header."""

    target_class = NamedTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <token>`: create one on your profile page"}
