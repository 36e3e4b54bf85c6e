"""Account pages: the login page (demo logins shown only in the demo) and the profile page of API tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts.models import ApiToken
from portal.accounts.services import api_token_create, api_token_revoke


class GangwayLoginView(LoginView):
    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "is_demo": settings.GANGWAY_DEMO}


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    """List the user's tokens; POST creates one and shows its secret on this answer only."""
    secret, errors = None, {}
    if request.method == "POST":
        try:
            days = int(request.POST.get("expires_in_days", "90"))
        except ValueError:
            days = 0
        try:
            _, secret = api_token_create(user=request.user, name=request.POST.get("name", ""), expires_in_days=days)
        except ValidationError as error:
            errors = error.message_dict
    tokens = ApiToken.objects.filter(user=request.user)
    return render(request, "accounts/profile.html", {
        "tokens": tokens, "secret": secret, "errors": errors, "now": timezone.now(),
    }, status=400 if errors else 200)


@login_required
@require_POST
def token_revoke(request, token_key: str):
    if api_token_revoke(user=request.user, token_key=token_key):
        messages.success(request, f"Token {token_key}… revoked.")
    return redirect("profile")
