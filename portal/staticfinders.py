"""Serves plotly.min.js from the installed plotly package as static/vendor/plotly.min.js (no CDN)."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
STATIC_PATH = "vendor/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_DIR))
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path == STATIC_PATH:
            match = str(PLOTLY_DIR / "plotly.min.js")
            return [match] if (find_all or kwargs.get("all")) else match
        return [] if (find_all or kwargs.get("all")) else None

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
