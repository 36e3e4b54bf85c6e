"""`simulate`: replay a trace under named policies, print the metrics, write JSON and a Plotly report.

Used by `python -m scheduling.simulation …` and by the thin Django command `python manage.py simulate …`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

from scheduling.simulation.engine import simulate
from scheduling.simulation.fleet import FleetError
from scheduling.simulation.gaming import SEEDS as GAMING_SEEDS, gaming_table, run_gaming
from scheduling.simulation.metrics import add_fairness, summarize
from scheduling.simulation.policies import POLICIES, get_policy, with_approval, with_overrides
from scheduling.simulation.report import table, team_table, write_plot
from scheduling.simulation.scenario import build_scenario
from scheduling.simulation.suite import SETS as SUITE_SETS, SuiteError, run_suite, suite_table
from scheduling.simulation.trace import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="philly",
                        help="'philly' (built in), 'synthetic' (seeded), or the path of a job CSV (generic or ITP-shaped)")
    parser.add_argument("--teams", type=int, default=None,
                        help="teams to hash an ITP trace's job_id into (default 4) or of the synthetic trace (default 8)")
    parser.add_argument("--load", type=float, default=None,
                        help="size a fleet of 8-GPU nodes so the trace's average demand is this share of it "
                             "(default 0.85 for ITP and synthetic traces)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic trace (the first seed of --seeds)")
    parser.add_argument("--seeds", type=int, default=None,
                        help=f"--scenario gaming: run this many seeds from --seed (default {GAMING_SEEDS})")
    parser.add_argument("--scenario", choices=("gaming",), default=None,
                        help="'gaming': one team plays each gaming strategy on a seeded day of 1,024 GPUs; its gain and "
                             "the others' waits against the honest run, with 95 %% intervals over the seeds (docs/gaming.md)")
    parser.add_argument("--undefended", action="store_true",
                        help="--scenario gaming: also run every strategy with the defences off (twice the time)")
    parser.add_argument("--suite", nargs="?", const="standard", choices=tuple(SUITE_SETS), default=None,
                        help="run the policy benchmark suite (Philly ×0.25, ITP cluster02/03/07, synthetic; "
                             "no checkpoints and 30-min checkpoints) and print one table; '--suite robustness': the "
                             "same kinds of trace with other seeds, teams and loads")
    parser.add_argument("--replicas", type=int, default=1,
                        help="--suite: also replay this many − 1 copies of every trace, each job submitted up to a minute "
                             "later (seeded), and show gangway's ratios with their spread (default 1: the logs as they are)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="change a SchedulerConfig field of the gangway policy for this run (repeatable; --suite and "
                             "replays), e.g. --set single_pods_beside_long_runners=true --set payoff_margin=4")
    parser.add_argument("--traces-dir", default=None,
                        help="directory of the ITP traces for --suite (default: ../shared/traces/microsoft_itp_elasticflow "
                             "relative to the project root)")
    parser.add_argument("--workers", type=int, default=None, help="processes for --suite and --scenario (default: one per core)")
    parser.add_argument("--fleet", default=None, help="fleet file (YAML/JSON, the loadfleet format) or node list CSV")
    parser.add_argument("--quotas", default=None, help="CSV team,gpus[,flavor]; default: VC sizes (Philly) or equal shares")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink fleet and quotas by this factor (0.25: contended)")
    parser.add_argument("--policy", default=",".join(POLICIES), help=f"comma-separated: {', '.join(POLICIES)}")
    parser.add_argument("--from", dest="date_from", default=None, help="first submit day, YYYY-MM-DD (Philly)")
    parser.add_argument("--to", dest="date_to", default=None, help="last submit day, inclusive (Philly)")
    parser.add_argument("--checkpoint-interval", type=int, default=None,
                        help="seconds between checkpoints of every job (default: none, a preempted job restarts)")
    parser.add_argument("--approve", choices=("none", "all"), default=None,
                        help="preemption plans the simulated admin approves (default: per policy)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the metrics as JSON here")
    parser.add_argument("--plot", dest="plot_out", default=None, help="write a Plotly HTML report here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(options: argparse.Namespace | dict, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> dict:
    o = options if isinstance(options, dict) else vars(options)
    if o.get("suite"):
        return run_suite_command(o, stdout, stderr)
    if o.get("scenario") == "gaming":
        return run_gaming_command(o, stdout, stderr)
    policies = [with_approval(get_policy(name.strip()), o.get("approve")) for name in o["policy"].split(",") if name.strip()]
    policies = [with_overrides(p, o.get("overrides") or ()) if p.name == "gangway" else p for p in policies]
    loaded = time.perf_counter()
    scenario = build_scenario(
        o["trace"], fleet=o.get("fleet"), quotas=o.get("quotas"), scale=o.get("scale", 1.0),
        date_from=o.get("date_from"), date_to=o.get("date_to"), checkpoint_interval_s=o.get("checkpoint_interval"),
        teams=o.get("teams"), load=o.get("load"), seed=o.get("seed") or 1,
    )
    jobs = len(scenario.trace.jobs)
    print(
        f"{scenario.name}: {jobs:,} jobs, {len(scenario.trace.teams)} teams, {len(scenario.fleet.nodes)} nodes, "
        f"{scenario.fleet.gpus:,} GPUs (loaded in {time.perf_counter() - loaded:.1f}s)",
        file=stdout,
    )
    results: dict[str, dict] = {}
    for policy in policies:
        bar = None if o.get("no_progress") else ProgressBar(policy.name, stderr)
        result = simulate(scenario, policy, progress=bar)
        if bar is not None:
            bar.close()
        results[policy.name] = summarize(result)
        print(f"  {policy.name}: {result.wall_s:.1f}s wall, {result.cpu_s:.1f}s CPU, {result.cycles:,} cycles, {result.events:,} events", file=stdout)
    add_fairness(results)
    document = {
        "scenario": {
            "name": scenario.name,
            "trace": o["trace"],
            "jobs": jobs,
            "teams": list(scenario.trace.teams),
            "nodes": len(scenario.fleet.nodes),
            "gpus": scenario.fleet.gpus,
            "scale": o.get("scale", 1.0),
            "topology": list(scenario.fleet.topology),
            "quotas": {team: dict(q) for team, q in scenario.quotas.items()},
            "checkpoint_interval_s": scenario.checkpoint_interval_s,
            "trace_gpu_hours": scenario.trace.gpu_seconds / 3600.0,
        },
        "policies": results,
    }
    print(file=stdout)
    print("waits in seconds (total time pending per job); 'worst team ×iso' = highest team mean wait / its fifo-isolated one",
          file=stdout)
    print(table(results), file=stdout)
    print(file=stdout)
    print(team_table(results), file=stdout)
    if o.get("json_out"):
        with open(o["json_out"], "w") as handle:
            json.dump(document, handle, indent=1, default=_json_default)
        print(f"wrote {o['json_out']}", file=stdout)
    if o.get("plot_out"):
        write_plot(document, o["plot_out"])
        print(f"wrote {o['plot_out']}", file=stdout)
    return document


def run_suite_command(o: dict, stdout: TextIO, stderr: TextIO) -> dict:
    started = time.perf_counter()
    names = tuple(name.strip() for name in (o.get("policy") or ",".join(POLICIES)).split(",") if name.strip())
    for name in names:
        get_policy(name)
    quiet = o.get("no_progress")
    document = run_suite(
        o.get("traces_dir"), policies=names, traces=SUITE_SETS[o["suite"]], workers=o.get("workers"),
        progress=None if quiet else (lambda line: print(f"  {line}", file=stderr, flush=True)),
        replicas=1 if o.get("replicas") is None else o["replicas"], overrides=tuple(o.get("overrides") or ()),
    )
    document["wall_s"] = time.perf_counter() - started
    print("waits in seconds; ratios are mean waits ÷ kueue-like's (< 1: shorter); GPU-h lost in % of GPU-h served",
          file=stdout)
    if document["config_overrides"]:
        print(f"gangway with --set {' --set '.join(document['config_overrides'])}", file=stdout)
    print(suite_table(document, document["policies"]), file=stdout)
    print(f"suite: {len(document['rows'])} rows in {document['wall_s']:.0f}s wall", file=stdout)
    return _written(document, o, stdout)


def run_gaming_command(o: dict, stdout: TextIO, stderr: TextIO) -> dict:
    started = time.perf_counter()
    quiet = o.get("no_progress")
    seeds = tuple(range(o.get("seed") or 1, (o.get("seed") or 1) + (o.get("seeds") or GAMING_SEEDS)))
    document = run_gaming(seeds=seeds, workers=o.get("workers"), with_undefended=bool(o.get("undefended")),
                          progress=None if quiet else (lambda line: print(f"  {line}", file=stderr, flush=True)))
    document["wall_s"] = time.perf_counter() - started
    print(f"gaming scenario: {document['jobs']:,} jobs, {document['gpus']:,} GPUs, seeds {', '.join(map(str, seeds))}, gaming team "
          f"{document['gamer']}; figures are means over the seeds; ×honest is the mean of each seed's ratio to the honest "
          f"run of the same policy and seed, with its 95 % interval", file=stdout)
    print(gaming_table(document), file=stdout)
    replays = sum(len(rows) for rows in document["policies"].values()) * len(seeds)
    print(f"gaming: {replays} replays in {document['wall_s']:.0f}s wall", file=stdout)
    return _written(document, o, stdout)


def _written(document: dict, o: dict, stdout: TextIO) -> dict:
    """The document, written as JSON where --json says."""
    if o.get("json_out"):
        with open(o["json_out"], "w") as handle:
            json.dump(document, handle, indent=1, default=_json_default)
        print(f"wrote {o['json_out']}", file=stdout)
    return document


def _json_default(value):
    return str(value)


class ProgressBar:
    """A one-line progress bar on stderr, redrawn in place."""

    def __init__(self, label: str, stream: TextIO, width: int = 30) -> None:
        self.label, self.stream, self.width = label, stream, width
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        fraction = min(1.0, done / total) if total else 1.0
        filled = int(fraction * self.width)
        self.stream.write(
            f"\r{self.label:>14} [{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:5.1f}% "
            f"{done:,}/{total:,} events {time.perf_counter() - self.started:6.1f}s"
        )
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduling.simulation", description=__doc__.splitlines()[0])
    add_arguments(parser)
    options = parser.parse_args(argv)
    try:
        run(options)
    except (TraceError, FleetError, SuiteError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
