"""Serves the JavaScript we vendor from installed Python packages (plotly.js from plotly, htmx from django-htmx) as
static/vendor/<name>-<package version>.min.js: no CDN, nothing to download, and a name that changes with the
version, so browsers may cache it for good (see WHITENOISE_IMMUTABLE_FILE_TEST in the settings)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import django_htmx
import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

VENDORED = {
    "plotly": (f"vendor/plotly-{version('plotly')}.min.js", Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"),
    "htmx": (f"vendor/htmx-{version('django-htmx')}.min.js", Path(django_htmx.__file__).resolve().parent / "static" / "django_htmx" / "htmx-2.min.js"),
}
"""name → (static path, file in the installed package)."""


def vendored_path(name: str) -> str:
    return VENDORED[name][0]


class _FileStorage(FileSystemStorage):
    """One file of a package directory, listed under its vendored name."""

    def __init__(self, source: Path, path: str):
        super().__init__(location=str(source.parent))
        self.source, self.path_in_static = source, path

    def path(self, name: str) -> str:
        return str(self.source) if name == self.path_in_static else super().path(name)


class VendorFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        many = find_all or kwargs.get("all")
        matches = [str(source) for static_path, source in VENDORED.values() if static_path == path]
        if many:
            return matches
        return matches[0] if matches else []  # as Django's own finders: a None here would be "found" as [None]

    def list(self, ignore_patterns):
        for static_path, source in VENDORED.values():
            yield static_path, _FileStorage(source, static_path)
