"""Settings of a test run: the development defaults, asked for explicitly (production refuses to start without a
SECRET_KEY and serves HTTPS only). Processes the tests start inherit the same environment."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "test-only-insecure-key")

from portal.settings import *  # noqa: E402,F403
