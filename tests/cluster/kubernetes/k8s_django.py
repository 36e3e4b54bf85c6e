"""Django-side helpers of the glue tests: one pass of the watcher, a team with a queue, a researcher's API client."""

from __future__ import annotations

import io

from django.core.management import call_command
from rest_framework.test import APIClient

from scheduling.models import Cohort, Flavor, Membership, Queue, QueueQuota, QueueUsage, Role, Team
from tests.conftest import make_user

H100 = "NVIDIA-H100-80GB-HBM3"


def watch_once() -> str:
    out = io.StringIO()
    call_command("watch_cluster", "--once", stdout=out)
    return out.getvalue()


def the_vision_queue(nominal: int = 32) -> Queue:
    team = Team.objects.create(name="vision")
    queue = Queue.objects.create(name="vision-main", team=team, cohort=Cohort.objects.create(name="shared"))
    QueueQuota.objects.create(queue=queue, flavor=Flavor.objects.get(name=H100), nominal=nominal)
    QueueUsage.objects.create(queue=queue)
    return queue


def a_researchers_client(queue: Queue) -> APIClient:
    """The API as a researcher of the queue's team."""
    user = make_user("vision-researcher")
    Membership.objects.create(user=user, team=queue.team, role=Role.RESEARCHER)
    client = APIClient()
    client.force_authenticate(user)
    return client
