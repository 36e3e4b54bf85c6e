"""`manage.py create_api_token USER --name NAME [--days N]`: a named, expiring API token, printed once."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.accounts.services import api_token_create


class Command(BaseCommand):
    help = "Create a named API token for USER that expires after --days (printed once; only a digest is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for (laptop, CI, …)")
        parser.add_argument("--days", type=int, default=90, help="days until it expires (1-365, default 90)")

    def handle(self, *args, username: str, name: str, days: int, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        try:
            _, secret = api_token_create(user=user, name=name, expires_in_days=days)
        except ValidationError as error:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())) from None
        self.stdout.write(secret)
