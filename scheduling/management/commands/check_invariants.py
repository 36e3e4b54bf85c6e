"""`manage.py check_invariants`: exit 1, naming each, when an invariant of the scheduler's state is broken."""

import sys

from django.core.management.base import BaseCommand

from scheduling.selectors.invariants import invariant_violations


class Command(BaseCommand):
    help = ("Check that no node is over-committed, no queue is over quota, every admitted job has a full placement "
            "on existing nodes and no gang is released twice or half-forgotten. Exit status 1 on any violation.")

    def add_arguments(self, parser):
        parser.add_argument("--no-cluster", action="store_true", help="check the database only; do not ask the cluster what it runs")

    def handle(self, *args, no_cluster: bool, **options):
        cluster = None
        if not no_cluster:
            from scheduling.cluster.registry import get_cluster

            cluster = get_cluster()
        violations = invariant_violations(cluster=cluster)
        if violations:
            for violation in violations:
                self.stderr.write(f"VIOLATION: {violation}")
            self.stderr.write(f"{len(violations)} invariant violation(s)")
            sys.exit(1)
        self.stdout.write(self.style.SUCCESS("all invariants hold"))
