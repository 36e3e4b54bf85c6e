"""schemathesis over every API operation against a live server: no server error, every answer as the schema says.
Tier 2 runs it on gunicorn over PostgreSQL (DEBUG off, as in production); tier 1 runs a smaller version on Django's
live test server over SQLite. The long run (≥ 10,000 requests) is `python manage.py fuzz_api --examples 50`."""

from __future__ import annotations

import pytest
from django.db import connection

from scheduling.livebench import fuzz, server, world
from tests.conftest import IS_INTEGRATION

SEED = 11
USERS = ("vision-researcher", "admin")


def assert_clean(report: fuzz.FuzzReport, *, examples: int) -> None:
    print("\n" + fuzz.table(report, examples=examples, seed=SEED))
    assert report.requests > 0
    assert report.findings == [], fuzz.table(report, examples=examples, seed=SEED)


@pytest.mark.integration
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch_on_gunicorn_over_postgresql(transactional_db):
    assert connection.vendor == "postgresql"
    examples = 16  # about 2,300 requests: two minutes on a 2-core machine
    world.demo_world_seed()
    tokens = world.api_tokens(USERS)
    port = server.free_port()
    # Errors and schema mismatches are what is looked for, not the rate limit; no worker runs reconcile passes.
    web = server.gunicorn_start(port=port, workers=2, GANGWAY_THROTTLE_USER="100000000/min", GANGWAY_RECONCILE_ON_WRITE="0")
    try:
        report = fuzz.fuzz(base_url=f"http://127.0.0.1:{port}", tokens=tokens, examples=examples, seed=SEED)
    finally:
        server.stop(web)
    assert_clean(report, examples=examples)
    assert report.statuses[200] > 0 and report.statuses[400] > 0, "valid and invalid requests both reached the views"


@pytest.mark.skipif(IS_INTEGRATION, reason="tier 2 runs the full version on gunicorn over PostgreSQL")
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch_on_the_live_test_server(live_server):
    examples = 3
    world.demo_world_seed()
    tokens = world.api_tokens(["admin"])

    report = fuzz.fuzz(base_url=live_server.url, tokens=tokens, examples=examples, seed=SEED)

    assert_clean(report, examples=examples)
