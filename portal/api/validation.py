"""A body's errors in one round: the serializer's (shapes, types, bounds) and the service's (names, quotas,
allotments) together in one 400, rather than the second kind only once the first is fixed."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import SkipField, empty

from portal.api.errors import flat_errors, validation_body


def validated_body(serializer_class, request, *, check: Callable[[dict], object] | None = None) -> dict:
    """The validated body. Otherwise one 400 with every error: the serializer's, and `check(fields)`'s — the
    service run with `validate_only=True` on the fields whose shape was right (it raises ValidationError, or
    PermissionDenied / DoesNotExist, which win as 403 / 404). Where both name one field, the serializer's
    reason stands: the service only saw the field missing."""
    if not isinstance(request.data, dict):
        raise DjangoValidationError({"body": ["must be a JSON object"]})
    serializer = serializer_class(data=request.data)
    if serializer.is_valid():
        return serializer.validated_data
    errors = flat_errors(serializer.errors)
    if check is not None:
        try:
            check(_fields_with_valid_shape(serializer, request.data))
        except DjangoValidationError as error:
            for field, reasons in validation_body(error).items():
                if not any(_related(field, flagged) for flagged in errors):
                    errors[field] = reasons
    raise DjangoValidationError(errors)


def _fields_with_valid_shape(serializer: serializers.Serializer, data: dict) -> dict:
    """The validated value (or default) of each field of `serializer` that has no error; fields with one are absent,
    but for a mapping (`quotas`, `allotments`), whose entries with a valid shape are kept."""
    fields = {}
    for name, field in serializer.fields.items():
        value = data.get(name, empty)
        if name in serializer.errors:
            if isinstance(field, serializers.DictField) and isinstance(value, dict):
                fields[name] = _valid_entries(field.child, value)
            continue
        try:
            fields[name] = field.run_validation(value)
        except (SkipField, serializers.ValidationError):
            continue
    return fields


def _valid_entries(child: serializers.Field, mapping: dict) -> dict:
    valid = {}
    for key, value in mapping.items():
        try:
            valid[key] = child.run_validation(value)
        except serializers.ValidationError:
            continue
    return valid


def _related(field: str, other: str) -> bool:
    """One dotted path is the other or lies inside it (`pod_sets` and `pod_sets.0.count`)."""
    return field == other or field.startswith(other + ".") or other.startswith(field + ".")
