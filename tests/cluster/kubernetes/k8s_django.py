"""Django-side helpers of the glue tests: one pass of the watcher, a team with a queue."""

from __future__ import annotations

import io

from django.core.management import call_command

from scheduling.models import Cohort, Flavor, Queue, QueueQuota, QueueUsage, Team

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
