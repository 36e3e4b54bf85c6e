"""A database that cannot be reached is a 503 in the API's error shape, with Retry-After: never a 500 traceback."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("error", [OperationalError("server closed the connection unexpectedly"),
                                   InterfaceError("connection already closed")], ids=["operational", "interface"])
def test_a_database_error_while_answering_is_a_503_to_retry(client_as, monkeypatch, error):
    def unavailable(**_):
        raise error

    monkeypatch.setattr("scheduling.selectors.team_list", unavailable)

    response = client_as("admin").get("/api/v1/teams/")

    assert response.status_code == 503
    assert response.json() == {"detail": ["the database is unavailable; try again shortly"]}
    assert response["Retry-After"] == "5"
