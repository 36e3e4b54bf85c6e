"""`manage.py reconcile [--once]`: run reconcile passes in this process, without Celery."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand

from scheduling.services import reconcile_pass_run
from scheduling.tasks import reconcile_lock


class Command(BaseCommand):
    help = "Run one reconcile pass (--once) or loop every GANGWAY_RECONCILE_INTERVAL_S seconds."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="run one pass, print what it did, and exit")
        parser.add_argument("--interval", type=float, default=None, help="seconds between passes (loop mode)")

    def handle(self, *args, once: bool, interval: float | None, **options):
        interval = interval or settings.GANGWAY_RECONCILE_INTERVAL_S
        while True:
            with reconcile_lock() as acquired:
                result = reconcile_pass_run() if acquired else None
            if result is None:
                self.stdout.write("skipped: another reconcile pass holds the lock")
            else:
                self.report(result)
            if once:
                return
            time.sleep(interval)

    def report(self, result) -> None:
        if result.admitted:
            self.stdout.write(f"admitted {len(result.admitted)} job(s): {', '.join(f'#{i}' for i in result.admitted)}")
        else:
            self.stdout.write("admitted nothing")
        for label, ids in (("started", result.started), ("finished", result.finished), ("preempted", result.preempted),
                           ("evicted", result.evicted), ("proposed preemption plans", result.proposed_plans)):
            if ids:
                self.stdout.write(f"{label}: {', '.join(map(str, ids))}")
        self.stdout.write(f"{result.pending} job(s) left pending")
