"""`manage.py simulate`: replay a trace under named policies (a thin wrapper over scheduling.simulation.cli)."""

from django.core.management.base import BaseCommand, CommandError

from scheduling.simulation.cli import add_arguments, run
from scheduling.simulation.fleet import FleetError
from scheduling.simulation.trace import TraceError


class Command(BaseCommand):
    help = "Replay a job trace (Philly or a CSV) on virtual time under named policies and compare them."

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **options):
        try:
            run(options, stdout=self.stdout, stderr=self.stderr)
        except (TraceError, FleetError, ValueError, OSError) as error:
            raise CommandError(str(error)) from error
