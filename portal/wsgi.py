"""WSGI entry point for gunicorn."""

import gc
import os
from pathlib import Path

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.template.loader import get_template
from django.urls import reverse

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()


def _load_what_every_worker_keeps() -> None:
    """The URL patterns and the project's templates (compiled once, then cached), loaded now rather than by the first
    requests, so that they are among what gc.freeze sets aside below."""
    reverse("web:job-list")
    for directory in settings.TEMPLATES[0]["DIRS"]:
        for path in Path(directory).rglob("*.html"):
            get_template(path.relative_to(directory).as_posix())


_load_what_every_worker_keeps()
# What is loaded by now lives as long as the worker: out of the collector's way. A full collection walked all of it,
# 60-120 ms at random requests, the slowest of every page at the live benchmark's scale (~15 ms after freezing).
gc.freeze()
