"""Concurrent writes on PostgreSQL: creates of one name at once answer 201 and 400, never an IntegrityError 500."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from scheduling.models import PriorityClass, Queue, Team
from tests.integration.test_crash_and_concurrency import run_together

pytestmark = pytest.mark.integration


def post_as(user, path, body):
    def post():
        client = APIClient()
        client.force_authenticate(user)
        response = client.post(path, body, format="json")
        return response.status_code, response.json()

    return post


@pytest.mark.parametrize(
    ("path", "body", "model"),
    [
        pytest.param("/api/v1/teams/", {"name": "robotics"}, Team, id="a team"),
        pytest.param("/api/v1/queues/", {"name": "vision-burst", "team": "vision"}, Queue, id="a queue"),
        pytest.param("/api/v1/priority-classes/", {"name": "urgent", "value": 100}, PriorityClass, id="a priority class"),
    ],
)
def test_two_creates_of_one_name_at_once_give_one_201_and_one_400_naming_the_field(transactional_db, org, path, body, model):
    assert connection.vendor == "postgresql"

    results = run_together(post_as(org["admin"], path, body), count=4)

    statuses = sorted(status for status, _ in results)
    assert statuses == [201, 400, 400, 400]
    for status, payload in results:
        if status == 400:
            assert payload == {"name": [f"a {model._meta.verbose_name} named {body['name']!r} already exists"]}
    assert model.objects.filter(name=body["name"]).count() == 1
