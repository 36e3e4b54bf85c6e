"""Maps errors to HTTP, every 4xx in one shape: {"dotted.field.path": [reason, ...]}; errors that belong to no
field under "detail". Validation → 400, unreadable body → 400/413/415, permission → 403, missing → 404; a database
that cannot be reached (restarting, failing over) → 503, in the same shape, not a 500."""

from __future__ import annotations

import logging

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger("portal.api")


def validation_body(error: DjangoValidationError) -> dict:
    if hasattr(error, "error_dict"):
        return {field: [str(m) for m in messages] for field, messages in error.message_dict.items()}
    return {"detail": [str(m) for m in error.messages]}


def flat_errors(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail ({"pod_sets": [{}, {"count": [...]}]}) as dotted paths ({"pod_sets.1.count": [...]})."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = "detail" if key in ("non_field_errors", "detail") and not prefix else str(key)
            flat.update(flat_errors(value, f"{prefix}.{name}" if prefix else name))
        return flat
    if isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        flat = {}
        for i, item in enumerate(detail):
            flat.update(flat_errors(item, f"{prefix}.{i}" if prefix else str(i)))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or "detail": [str(m) for m in messages]}


DATABASE_RETRY_AFTER_S = 5


def exception_handler(exc, context):
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", exc)
        return Response({"detail": ["the database is unavailable; try again shortly"]}, status=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)})
    if isinstance(exc, DjangoValidationError):
        return Response(validation_body(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": ["Not found."]}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, exceptions.ParseError):
        return Response({"body": [f"not valid JSON: {exc.detail}"]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.APIException) and exc.status_code in (413, 415):
        return Response({"body": [str(exc.detail)]}, status=exc.status_code)
    response = drf_exception_handler(exc, context)
    if response is not None and 400 <= response.status_code < 500:
        response.data = flat_errors(response.data)
    return response
