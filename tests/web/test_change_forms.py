"""The queues page's change forms, opened on demand: htmx asks for one into its row (a page of its own without
JavaScript), a refused change comes back into that row with its errors (400), a saved one sends the browser to the
queues page."""

from __future__ import annotations

import pytest

from scheduling.models import QueueQuota, TeamAllotment
from tests.conftest import H100

HTMX = {"HTTP_HX_REQUEST": "true"}
QUOTA = f"/queues/vision-main/quotas/{H100}/"
ALLOTMENT = f"/teams/vision/allotments/{H100}/"


@pytest.mark.parametrize("user, url, form_id, first_field", [
    ("vision-lead", QUOTA, f"quota-vision-main-{H100}", "nominal"),
    ("admin", ALLOTMENT, f"allotment-vision-{H100}", "gpus"),
])
def test_htmx_opens_a_change_form_in_its_row_with_its_first_field_focused(browser_as, user, url, form_id, first_field):
    response = browser_as(user).get(url, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200 and "<html" not in fragment
    assert f'id="{form_id}"' in fragment and f'hx-post="{url}"' in fragment
    assert f'name="{first_field}"' in fragment.split("autofocus")[0].rsplit("<input", 1)[1], "the first field has the focus"


@pytest.mark.parametrize("user, url, body, error_id, message", [
    ("vision-lead", QUOTA, {"nominal": "99", "borrowing_limit": "", "lending_limit": ""},
     f"id_vision-main_{H100}_nominal_error", "its allotment is 32"),
    ("admin", ALLOTMENT, {"gpus": "8"}, f"id_vision_{H100}_gpus_error", "below the 32 GPUs"),
])
def test_a_refused_change_comes_back_into_its_row_as_a_400_with_the_typed_values(browser_as, user, url, body, error_id, message):
    response = browser_as(user).post(url, body, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 400 and "<html" not in fragment, "the row, not the whole page"
    assert f'id="{error_id}"' in fragment and message in fragment
    assert f'value="{next(iter(body.values()))}"' in fragment
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 32
    assert TeamAllotment.objects.get(team__name="vision").gpus == 32


def test_a_saved_change_sends_htmx_to_the_queues_page_with_its_message(browser_as):
    client = browser_as("vision-lead")
    response = client.post(QUOTA, {"nominal": "24", "borrowing_limit": "", "lending_limit": ""}, **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/queues/"
    assert QueueQuota.objects.get(queue__name="vision-main").nominal == 24
    assert f"Quota of vision-main for {H100} saved." in client.get("/queues/").content.decode()


@pytest.mark.parametrize("url", ["/queues/nope/quotas/H100-80GB/", "/queues/vision-main/quotas/A100/",
                                 "/teams/nope/allotments/H100-80GB/", "/teams/vision/allotments/A100/"])
def test_the_form_of_something_that_does_not_exist_is_not_found(browser_as, url):
    assert browser_as("admin").get(url, **HTMX).status_code == 404
