"""The shared cache on Redis (rate-limit and bad-token counters), failing open: while Redis is unreachable a read is
a miss and a write is dropped, so the limits lapse for the outage instead of every request failing with a 500."""

from __future__ import annotations

import logging

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("portal.cache")


class FailOpenRedisCache(RedisCache):
    def _or(self, fallback, method, *args):
        try:
            return method(*args)
        except (RedisConnectionError, RedisTimeoutError) as error:
            logger.warning("cache unreachable, %s answered as a miss: %s", method.__name__, error)
            return fallback

    def get(self, key, default=None, version=None):
        return self._or(default, super().get, key, default, version)

    def get_many(self, keys, version=None):
        return self._or({}, super().get_many, keys, version)

    def has_key(self, key, version=None):
        return self._or(False, super().has_key, key, version)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(False, super().add, key, value, timeout, version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(None, super().set, key, value, timeout, version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(list(data), super().set_many, data, timeout, version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(False, super().touch, key, timeout, version)

    def incr(self, key, delta=1, version=None):
        return self._or(delta, super().incr, key, delta, version)

    def delete(self, key, version=None):
        return self._or(False, super().delete, key, version)

    def delete_many(self, keys, version=None):
        return self._or(None, super().delete_many, keys, version)

    def clear(self):
        return self._or(False, super().clear)
