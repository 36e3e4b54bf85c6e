"""Integration tests run only with GANGWAY_INTEGRATION=1, and then fail (never skip) when a service is missing."""

import os

import pytest

IS_INTEGRATION = os.environ.get("GANGWAY_INTEGRATION") == "1"


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="integration test: set GANGWAY_INTEGRATION=1 (with PostgreSQL and Redis) to run it")
    for item in items:
        if "integration" in item.keywords and not IS_INTEGRATION:
            item.add_marker(skip)
