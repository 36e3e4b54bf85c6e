"""The Celery application: workers run reconcile passes and usage collection, beat schedules them."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("gangway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["scheduling"])


@app.on_after_finalize.connect
def schedule_reconcile(sender: Celery, **_: object) -> None:
    from django.conf import settings

    sender.add_periodic_task(
        settings.GANGWAY_RECONCILE_INTERVAL_S, sender.signature("scheduling.tasks.reconcile"), name="reconcile"
    )
    sender.add_periodic_task(
        settings.GANGWAY_ESTIMATE_INTERVAL_S, sender.signature("scheduling.tasks.refresh_estimates"), name="refresh-estimates"
    )
    sender.add_periodic_task(
        settings.GANGWAY_USAGE_INTERVAL_S, sender.signature("scheduling.tasks.collect_usage"), name="collect-usage"
    )
