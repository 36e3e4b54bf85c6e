"""`manage.py loadfleet PATH`: sync the nodes to a fleet file (all or nothing)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling.fleetfile import FleetFileError, fleet_load
from scheduling.services import fleet_sync


class Command(BaseCommand):
    help = "Sync the fleet (nodes and topology levels) to a YAML or JSON fleet file; an invalid file changes nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", help="fleet file (default: settings.GANGWAY_FLEET)")

    def handle(self, *args, path, **options):
        path = path or settings.GANGWAY_FLEET
        if not path:
            raise CommandError("give a fleet file path, or set GANGWAY_FLEET")
        try:
            result = fleet_sync(fleet=fleet_load(path))
        except FleetFileError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            self.style.SUCCESS(f"fleet synced: {len(result.added)} added, {len(result.updated)} updated, {len(result.removed)} removed")
        )
