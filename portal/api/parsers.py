"""The API's only body parser: a JSON object of bounded size and depth (form bodies are refused with 415)."""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.utils.json import strict_constant


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class BoundedJSONParser(JSONParser):
    """JSON with at most GANGWAY_API_MAX_BODY_BYTES and GANGWAY_API_MAX_JSON_DEPTH levels of nesting, and no NUL
    characters anywhere (PostgreSQL's text and jsonb cannot store them)."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.GANGWAY_API_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(f"the body exceeds {limit} bytes")
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(raw.decode(encoding), parse_constant=strict_constant)  # NaN and Infinity are not JSON
        except RecursionError:
            raise exceptions.ParseError(f"nested deeper than {settings.GANGWAY_API_MAX_JSON_DEPTH} levels") from None
        except ValueError as error:
            raise exceptions.ParseError(str(error)) from None
        _check_depth_and_nul(data, settings.GANGWAY_API_MAX_JSON_DEPTH)
        return data


def _check_depth_and_nul(data, max_depth: int) -> None:
    """Walks the parsed value without recursion; a nesting beyond `max_depth` is a 400 on the body, a NUL
    character a 400 on the field that holds it."""
    stack: list[tuple[object, str, int]] = [(data, "", 1)]
    nul = "NUL characters (\\u0000) are not allowed"
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise exceptions.ValidationError({path or "body": [nul]})
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > max_depth:
            raise exceptions.ParseError(f"nested deeper than {max_depth} levels")
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            field = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "\x00" in key:
                raise exceptions.ValidationError({field.replace("\x00", ""): [nul]})
            stack.append((item, field, depth + 1))
