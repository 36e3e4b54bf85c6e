"""`manage.py bench cycle|quality|fragmentation|explain|estimate`: benchmarks of the scheduling core, printed as figures;
`bench live`: the live product (pass, pages, API, submit) at fleet scale in the configured database."""

import json

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Benchmark the scheduling core: cycle speed, placement quality against CP-SAT, fragmentation."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="bench", required=True)
        cycle = sub.add_parser("cycle", help="one admission cycle at fleet scale vs a first-fit baseline")
        cycle.add_argument("--nodes", type=int, default=1250)
        cycle.add_argument("--gpus-per-node", type=int, default=8)
        cycle.add_argument("--pending", type=int, default=100_000)
        cycle.add_argument("--queues", type=int, default=50)
        cycle.add_argument("--repeats", type=int, default=5)
        quality = sub.add_parser("quality", help="admitted GPUs vs the exact optimum (needs ortools)")
        quality.add_argument("--instances", type=int, default=50)
        fragmentation = sub.add_parser("fragmentation", help="whole free nodes over a job stream: Gangway vs first fit vs random")
        fragmentation.add_argument("--jobs", type=int, default=3000)
        explain = sub.add_parser("explain", help="explanations for the whole pending queue in one pass (target ≤ 1 s)")
        estimate = sub.add_parser("estimate", help="the forward start estimate of the whole queue (target ≤ 10 s)")
        for p in (explain, estimate):
            p.add_argument("--nodes", type=int, default=1250)
            p.add_argument("--gpus-per-node", type=int, default=8)
            p.add_argument("--pending", type=int, default=100_000)
            p.add_argument("--queues", type=int, default=50)
        explain.add_argument("--repeats", type=int, default=3)
        estimate.add_argument("--horizon-s", type=float, default=7 * 24 * 3600.0)
        for p in (cycle, quality, fragmentation, explain, estimate):
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--json", action="store_true", help="print one JSON object")
        _live_arguments(sub.add_parser("live", help="the pass, pages and submit at fleet scale in a fresh database"))
        load = sub.add_parser("submit-load", help="concurrent submitters against gunicorn with a pass loop running, vs a trivial GET")
        load.add_argument("--clients", type=int, default=32, help="concurrent submitters, each a researcher with their own token")
        load.add_argument("--seconds", type=float, default=60.0, help="seconds of submitting")
        load.add_argument("--baseline-s", type=float, default=20.0, help="seconds of the trivial GET, half before and half after")
        load.add_argument("--workers", type=int, default=3, help="gunicorn workers (compose and the manifests run 3 ...)")
        load.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker (... of 4 threads each)")
        load.add_argument("--port", type=int, default=0, help="default: a free port")
        load.add_argument("--wipe", action="store_true", help="empty the database first if it holds jobs")
        load.add_argument("--json", metavar="FILE", help="also write the figures as JSON")

    def handle(self, *args, **options):
        name = options["bench"]
        if name in ("live", "submit-load"):
            _require_migrated()
            return self._live(options) if name == "live" else self._submit_load(options)
        if name == "cycle":
            from scheduling.benchmarks import cycle

            for field in ("nodes", "gpus_per_node", "pending", "queues", "repeats"):
                if options[field] < 1:
                    raise CommandError(f"--{field.replace('_', '-')} must be at least 1")
            figures = cycle.run(
                nodes=options["nodes"], gpus_per_node=options["gpus_per_node"], pending=options["pending"],
                queues=options["queues"], repeats=options["repeats"], seed=options["seed"],
            )
        elif name in ("explain", "estimate"):
            from scheduling.benchmarks import explain as bench_explain

            for field in ("nodes", "gpus_per_node", "pending", "queues"):
                if options[field] < 1:
                    raise CommandError(f"--{field.replace('_', '-')} must be at least 1")
            sizes = {k: options[k] for k in ("nodes", "gpus_per_node", "pending", "queues", "seed")}
            if name == "explain":
                figures = bench_explain.run_explain(repeats=max(1, options["repeats"]), **sizes)
            else:
                figures = bench_explain.run_estimate(horizon_s=options["horizon_s"], **sizes)
        elif name == "quality":
            try:
                from scheduling.benchmarks import quality

                figures = quality.run(instances=options["instances"], seed=options["seed"])
            except ImportError as error:
                raise CommandError(f"bench quality needs OR-Tools: pip install -e '.[bench]' ({error})") from error
        else:
            from scheduling.benchmarks import fragmentation

            figures = fragmentation.run(jobs=options["jobs"], seed=options["seed"])
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            self.stdout.write(_table(figures))


    def _live(self, options) -> None:
        from scheduling.livebench import build, run

        for field in ("nodes", "gpus_per_node", "pending", "queues", "rounds", "clients", "busy_passes", "idle_passes"):
            if options[field] < 1:
                raise CommandError(f"--{field.replace('_', '-')} must be at least 1")
        scale = build.Scale(nodes=options["nodes"], gpus_per_node=options["gpus_per_node"], queues=options["queues"],
                            pending=options["pending"], usage_minutes=options["usage_minutes"], seed=options["seed"])
        try:
            figures = run.run(
                scale=scale, rounds=options["rounds"], clients=options["clients"], submit_s=options["submit_s"],
                busy_passes=options["busy_passes"], idle_passes=options["idle_passes"], url=options["url"],
                port=options["port"], workers=options["workers"], wipe=options["wipe"], profile_dir=options["profile"],
                reuse=options["reuse"],
                log=lambda line: self.stderr.write(line),
            )
        except run.NotFresh as error:
            raise CommandError(str(error)) from error
        if options["json"]:
            with open(options["json"], "w") as out:
                json.dump(figures, out, indent=2)
        self.stdout.write(run.table(figures))


    def _submit_load(self, options) -> None:
        from scheduling.livebench import build, server, submit_load
        from scheduling.models import Job

        for field in ("clients", "workers", "threads"):
            if options[field] < 1:
                raise CommandError(f"--{field} must be at least 1")
        if Job.objects.exists():
            if not options["wipe"]:
                raise CommandError("the database holds jobs; bench submit-load seeds its own world: pass --wipe to empty it first")
            build.database_wipe()
        figures = submit_load.load_run(clients=options["clients"], seconds=options["seconds"], baseline_s=options["baseline_s"],
                                       workers=options["workers"], threads=options["threads"], port=options["port"] or server.free_port(),
                                       log=lambda line: self.stderr.write(line))
        if options["json"]:
            with open(options["json"], "w") as out:
                json.dump(figures, out, indent=2)
        self.stdout.write(submit_load.table(figures))


def _live_arguments(live) -> None:
    live.add_argument("--pending", type=int, default=100_000, help="pending jobs (five times as many finished ones)")
    live.add_argument("--nodes", type=int, default=1250)
    live.add_argument("--gpus-per-node", type=int, default=8)
    live.add_argument("--queues", type=int, default=50)
    live.add_argument("--usage-minutes", type=int, default=60, help="minutes of GPU use samples of the running jobs")
    live.add_argument("--rounds", type=int, default=10, help="requests per page (each after one to the baseline)")
    live.add_argument("--clients", type=int, default=8, help="concurrent submitters")
    live.add_argument("--submit-s", type=float, default=30.0, help="seconds of submitting (and as many of the baseline)")
    live.add_argument("--busy-passes", type=int, default=3)
    live.add_argument("--idle-passes", type=int, default=3)
    live.add_argument("--url", help="an already running server on this database (default: start gunicorn on --port)")
    live.add_argument("--port", type=int, default=8000)
    live.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    live.add_argument("--wipe", action="store_true", help="empty the database first if it holds jobs")
    live.add_argument("--reuse", action="store_true",
                      help="measure the scale an earlier run built in this database, as it is now (no build; --pending "
                           "should match)")
    live.add_argument("--profile", metavar="DIR", help="write pyinstrument HTML profiles of a busy and an idle pass")
    live.add_argument("--seed", type=int, default=1)
    live.add_argument("--json", metavar="FILE", help="also write the figures as JSON")


def _table(figures: dict, indent: str = "") -> str:
    lines = []
    for key, value in figures.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.append(_table(value, indent + "  "))
        else:
            lines.append(f"{indent}{key:<40} {value}")
    return "\n".join(lines)


def _require_migrated() -> None:
    """The live benchmarks build in the configured database: a fresh one needs its tables first."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        name = connections[DEFAULT_DB_ALIAS].settings_dict["NAME"]
        raise CommandError(f"database {name} is not migrated: run `manage.py migrate` with the same DATABASE_URL first")
