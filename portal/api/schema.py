"""The OpenAPI schema's error answers: every operation documents its 4xx (and the 503 of a database outage) in the
one flat shape the API answers them in."""

from __future__ import annotations

ERRORS = "Errors"
ERRORS_SCHEMA = {
    "type": "object",
    "description": "Every 4xx: each dotted field path (`pod_sets.0.gpus_per_pod`, `query.limit`, `body`) with its "
                   "reasons; errors that belong to no field under `detail`.",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}
EVERY_OPERATION = {
    "400": "Invalid input: every error of the request at once.",
    "401": "Not signed in (no or an expired token).",
    "403": "Signed in, but not allowed to do this.",
    "404": "No such object.",
    "429": "Too many requests; try again later.",
    "503": "The database is unavailable (restarting, failing over); try again after Retry-After seconds.",
}
WITH_A_BODY = {
    "413": "The body is larger than GANGWAY_API_MAX_BODY_BYTES.",
    "415": "The body is not JSON.",
}


def document_errors(result, generator, request, public):
    """drf-spectacular post-processing hook: add the error answers to every operation of the API."""
    result.setdefault("components", {}).setdefault("schemas", {})[ERRORS] = ERRORS_SCHEMA
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for operation in operations.values():
            errors = {**EVERY_OPERATION, **(WITH_A_BODY if "requestBody" in operation else {})}
            for status, description in errors.items():
                operation["responses"].setdefault(status, {
                    "description": description,
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERRORS}"}}},
                })
    return result
