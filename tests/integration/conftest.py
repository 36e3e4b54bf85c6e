"""Integration tests run only with GANGWAY_INTEGRATION=1, and then fail (never skip) when a service is missing.
The skip hook lives in tests/conftest.py, so `integration` tests elsewhere in the suite follow the same rule."""

import pytest
from django.conf import settings
from django.db import connection

from scheduling.tasks import LOCK_KEY
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


@pytest.fixture
def services_are_real():
    """Fail loudly when the tier-2 services are not what the test needs; the Redis client, with no pass lock left."""
    assert connection.vendor == "postgresql", f"integration tests need PostgreSQL via DATABASE_URL, got {connection.vendor}"
    assert settings.CELERY_BROKER_URL.startswith("redis://"), f"integration tests need a Redis broker, got {settings.CELERY_BROKER_URL}"
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.ping()
    client.delete(LOCK_KEY)  # a lock left by an earlier run's crashed worker would make every pass skip
    return client
