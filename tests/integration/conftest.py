"""Integration tests run only with GANGWAY_INTEGRATION=1, and then fail (never skip) when a service is missing.
The skip hook lives in tests/conftest.py, so `integration` tests elsewhere in the suite follow the same rule."""

import pytest

from tests.integration.private_services import PrivatePostgres, PrivateRedis


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_postgres():
    server = PrivatePostgres()
    server.start()
    yield server
    server.remove()
