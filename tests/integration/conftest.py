"""Integration tests run only with GANGWAY_INTEGRATION=1, and then fail (never skip) when a service is missing.
The skip hook lives in tests/conftest.py, so `integration` tests elsewhere in the suite follow the same rule."""
