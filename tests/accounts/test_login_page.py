"""The login page shows the demo logins in the demo only."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("is_demo", "shown"), [(True, True), (False, False)], ids=["the demo shows them", "production does not"])
def test_the_demo_logins_are_shown_only_in_the_demo(client, settings, is_demo, shown):
    settings.GANGWAY_DEMO = is_demo

    page = client.get("/accounts/login/").content.decode()

    assert ("Demo logins" in page) is shown
    assert ("password <code>gangway</code>" in page) is shown
