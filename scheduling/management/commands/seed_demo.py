"""`manage.py seed_demo`: the demo fleet, teams, queues, users and jobs (idempotent)."""

from django.core.management.base import BaseCommand

from scheduling.services import reconcile_pass_run, usage_collect
from scheduling.services.demo import demo_backlog_seed, demo_seed


class Command(BaseCommand):
    help = "Seed the demo world: 1,024 H100 + 64 A100 GPUs, 8 teams, queues in cohort 'shared', users and jobs."

    def add_arguments(self, parser):
        parser.add_argument("--no-reconcile", action="store_true", help="do not run the first reconcile passes")

    def handle(self, *args, no_reconcile: bool, **options):
        result = demo_seed()
        if not no_reconcile:
            reconcile_pass_run()  # admits and releases the first jobs: the fleet is busy now
            result.jobs_created += demo_backlog_seed()  # a block-sized gang arrives and has to wait
            reconcile_pass_run()  # sees the first gangs running; explains what waits
            usage_collect()  # the first minute of GPU use: the pages show use, and idle allocations after the grace period
        self.stdout.write(self.style.SUCCESS(f"demo seeded ({result.jobs_created} jobs submitted)"))
        self.stdout.write("logins (password for all: gangway): " + ", ".join(name for name, _ in result.users))
