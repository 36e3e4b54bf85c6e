"""Token writes: a user creates, and revokes, their own named API tokens."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError

from portal.accounts.models import ApiToken

MAX_TOKEN_DAYS = 365


def api_token_create(*, user, name: str, expires_in_days: int) -> tuple[ApiToken, str]:
    """The stored token and its secret, shown once: only a digest is kept."""
    errors = {}
    if not isinstance(name, str) or not name.strip() or len(name) > 100 or "\x00" in name:
        errors["name"] = ["must be a non-empty name of at most 100 characters"]
    if not isinstance(expires_in_days, int) or isinstance(expires_in_days, bool) or not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        errors["expires_in_days"] = [f"must be a whole number of days between 1 and {MAX_TOKEN_DAYS}"]
    if errors:
        raise ValidationError(errors)
    return ApiToken.objects.create(user=user, expiry=dt.timedelta(days=expires_in_days), name=name.strip())


def api_token_revoke(*, user, token_key: str) -> int:
    """Revoke the user's token(s) with this key; another user's key revokes nothing."""
    deleted, _ = ApiToken.objects.filter(user=user, token_key=token_key).delete()
    return deleted
