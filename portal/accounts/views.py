"""Account pages: the login page (demo logins shown only in the demo)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import LoginView


class GangwayLoginView(LoginView):
    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "is_demo": settings.GANGWAY_DEMO}
