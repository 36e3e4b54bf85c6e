"""Named API tokens: hashed at rest, expiring, last use recorded, revocable from the profile page; bad tokens and
wrong passwords are rate limited; passwords pass Django's validators; the schema is for signed-in users."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.models import ApiToken
from portal.accounts.services import api_token_create

pytestmark = pytest.mark.django_db


def with_token(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_a_token_authenticates_is_stored_only_as_a_digest_and_records_its_last_use(org):
    token, secret = api_token_create(user=org["vision-researcher"], name="laptop", expires_in_days=30)

    assert with_token(secret).get("/api/v1/jobs/").status_code == 200

    stored = ApiToken.objects.get()
    assert secret not in (stored.digest, stored.token_key) and stored.token_key == secret[:len(stored.token_key)]
    assert stored.name == "laptop" and stored.last_used_at is not None
    assert dt.timedelta(days=29) < stored.expiry - timezone.now() <= dt.timedelta(days=30)


def test_an_expired_token_is_refused(org):
    _, secret = api_token_create(user=org["vision-researcher"], name="old", expires_in_days=1)
    ApiToken.objects.update(expiry=timezone.now() - dt.timedelta(seconds=1))

    assert with_token(secret).get("/api/v1/jobs/").status_code in (401, 403)


def test_the_profile_page_creates_lists_and_revokes_the_users_own_tokens(client, org):
    client.force_login(org["vision-researcher"])
    page = client.post("/accounts/profile/", {"name": "ci", "expires_in_days": "7"}).content.decode()
    token = ApiToken.objects.get(user=org["vision-researcher"])
    assert 'id="new-token"' in page and "ci" in page and token.token_key in page
    other, _ = api_token_create(user=org["language-researcher"], name="theirs", expires_in_days=7)

    assert client.post(f"/accounts/tokens/{other.token_key}/revoke/").status_code == 302
    assert ApiToken.objects.filter(pk=other.pk).exists(), "another user's token is not revoked"
    client.post(f"/accounts/tokens/{token.token_key}/revoke/")
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    assert "theirs" not in client.get("/accounts/profile/").content.decode()


@pytest.mark.parametrize(("body", "field"), [({"name": "", "expires_in_days": "7"}, "name"),
                                             ({"name": "x", "expires_in_days": "9999"}, "expires_in_days")])
def test_a_bad_token_request_on_the_profile_page_is_refused(client, org, body, field):
    client.force_login(org["vision-researcher"])
    response = client.post("/accounts/profile/", body)
    assert response.status_code == 400 and not ApiToken.objects.exists()


def test_create_api_token_prints_a_working_token_once(org):
    out = io.StringIO()
    call_command("create_api_token", "vision-researcher", "--name", "cli", "--days", "3", stdout=out)
    assert with_token(out.getvalue().strip()).get("/api/v1/jobs/").status_code == 200


def test_a_flood_of_bad_tokens_from_one_address_is_throttled(org, settings):
    settings.GANGWAY_BAD_TOKENS_PER_MINUTE = 5
    statuses = [with_token(f"{i:064x}").get("/api/v1/jobs/").status_code for i in range(8)]

    assert set(statuses[:5]) <= {401, 403} and statuses[5:] == [429] * 3


def test_wrong_passwords_lock_the_login_even_for_the_right_one_afterwards(client, org, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "vision-researcher", "password": "wrong"})

    response = client.post("/accounts/login/", {"username": "vision-researcher", "password": "gangway"})

    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize("password", ["123456", "gangway", "password1234", "12345678901234"])
def test_weak_passwords_are_refused(password):
    with pytest.raises(ValidationError):
        validate_password(password)


def test_a_long_uncommon_password_passes():
    validate_password("correct-horse-battery-staple")


@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/"])
def test_the_schema_and_docs_are_for_signed_in_users_only(client, org, url):
    assert client.get(url).status_code in (401, 403)
    client.force_login(org["vision-researcher"])
    assert client.get(url).status_code == 200
