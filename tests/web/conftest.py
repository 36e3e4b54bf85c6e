"""Page-test fixtures: a Django test client signed in as one of the org fixture's users."""

import pytest


@pytest.fixture
def browser_as(client, org):
    def login(username: str):
        client.force_login(org[username])
        return client

    return login
