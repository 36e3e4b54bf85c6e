"""Whitenoise, preferring what collectstatic wrote (with its .gz/.br siblings) over the finders' uncompressed originals:
plotly.js is 4.8 MB as shipped and 1.47 MB gzipped. Finders still serve whatever was never collected (tests, a fresh
clone). In development (autorefresh) only the versioned vendor files come from STATIC_ROOT first — they never change
under their name — so edits to our own CSS and JS show without running collectstatic again."""

from __future__ import annotations

from whitenoise.base import WhiteNoise
from whitenoise.middleware import WhiteNoiseMiddleware


class CollectedFirstWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    def add_files_from_finders(self):
        collected = dict(self.files)
        super().add_files_from_finders()
        self.files.update(collected)

    def candidate_paths_for_url(self, url):
        if self.immutable_file_test("", url):
            yield from WhiteNoise.candidate_paths_for_url(self, url)  # STATIC_ROOT
        yield from super().candidate_paths_for_url(url)
