"""Maps domain errors to HTTP: validation → 400 {field: [reason]}, permission → 403, missing → 404."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def validation_body(error: DjangoValidationError) -> dict:
    if hasattr(error, "error_dict"):
        return {field: [str(m) for m in messages] for field, messages in error.message_dict.items()}
    return {"non_field_errors": [str(m) for m in error.messages]}


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        return Response(validation_body(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, exceptions.ParseError):
        return Response({"body": [f"not valid JSON: {exc.detail}"]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response({"body": [str(exc.detail)]}, status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE)
    return drf_exception_handler(exc, context)
