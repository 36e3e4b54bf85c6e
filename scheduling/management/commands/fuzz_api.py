"""`manage.py fuzz_api`: schemathesis against gunicorn on the configured database; exits 1 on any finding."""

from django.core.management.base import BaseCommand, CommandError

from scheduling.models import Job


class Command(BaseCommand):
    help = ("Seed the demo world into a fresh database, start gunicorn on it and run schemathesis over every API "
            "operation as a researcher, a lead and an admin; print the requests, server errors and schema mismatches.")

    def add_arguments(self, parser):
        parser.add_argument("--examples", type=int, default=10,
                            help="cases per operation, user, data mode (valid / invalid) and path (random / known)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--users", default="vision-researcher,vision-lead,admin", help="demo users, comma-separated")
        parser.add_argument("--port", type=int, default=0, help="default: a free port")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
        parser.add_argument("--wipe", action="store_true", help="empty the database first if it holds jobs")

    def handle(self, *args, examples: int, seed: int, users: str, port: int, workers: int, wipe: bool, **options):
        try:
            import schemathesis  # noqa: F401 - a test dependency
        except ImportError as error:
            raise CommandError(f"fuzz_api needs schemathesis: pip install -e '.[test]' ({error})") from error
        from scheduling.livebench import build, fuzz, server, world

        if examples < 1:
            raise CommandError("--examples must be at least 1")
        if Job.objects.exists():
            if not wipe:
                raise CommandError("the database holds jobs; fuzz_api seeds its own world: pass --wipe to empty it first")
            build.database_wipe()
        port = port or server.free_port()
        world.demo_world_seed()
        tokens = world.api_tokens([u.strip() for u in users.split(",") if u.strip()])
        # The fuzz looks for server errors and schema mismatches, not for the rate limit (429s are documented), and
        # asks for no reconcile passes (no worker runs them).
        web = server.gunicorn_start(port=port, workers=workers, GANGWAY_THROTTLE_USER="100000000/min",
                                    GANGWAY_RECONCILE_ON_WRITE="0")
        try:
            report = fuzz.fuzz(base_url=f"http://127.0.0.1:{port}", tokens=tokens, examples=examples, seed=seed,
                               log=lambda line: self.stderr.write(line))
        finally:
            server.stop(web)
        self.stdout.write(fuzz.table(report, examples=examples, seed=seed))
        if report.findings:
            raise CommandError(f"{len(report.findings)} findings ({report.server_errors} server errors)")
