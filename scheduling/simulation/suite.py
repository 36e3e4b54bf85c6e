"""The policy benchmark suite: every policy over a fixed set of traces, with and without checkpoints.

Rows are trace × checkpointing (none: a preempted job restarts; every 30 min). The yardsticks
(`kueue-like`, `fifo-isolated`, `sjf-oracle`) never preempt, so checkpoints cannot change them:
they run once per trace and serve both rows. The runs are independent and go to a process pool
(one worker per core).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

from scheduling.simulation.confidence import estimate
from scheduling.simulation.engine import Scenario, simulate
from scheduling.simulation.metrics import add_fairness, summarize
from scheduling.simulation.policies import POLICIES, get_policy, with_overrides
from scheduling.simulation.scenario import build_scenario
from scheduling.simulation.trace import jittered

BASELINE = "kueue-like"
UNDER_TEST = "gangway"
CHECKPOINTS_S = (None, 1800)
ITP_DIR = Path("..") / "shared" / "traces" / "microsoft_itp_elasticflow"
"""Relative to the project root (where manage.py is)."""
JITTER_S = 60.0
"""Replica k > 0 of a trace submits every job up to this much later (seeded by k): the same workload, as another day's
timestamps could have read (trace.jittered)."""


@dataclass(frozen=True)
class SuiteTrace:
    name: str
    source: str
    """"philly", "synthetic", or an ITP file name inside the traces directory."""
    scale: float = 1.0
    teams: int | None = None
    """Teams to hash an ITP trace's job ids into, or of the synthetic trace (None: 4 and 8)."""
    load: float | None = None
    """The fleet sized so the mean demand is this share of it (None: 0.85)."""
    seed: int = 1
    """Of the synthetic trace."""


TRACES = (
    SuiteTrace("Philly ×0.25", "philly", scale=0.25),
    SuiteTrace("ITP cluster02", "cluster02.csv.gz"),
    SuiteTrace("ITP cluster03", "cluster03.csv.gz"),
    SuiteTrace("ITP cluster07", "cluster07.csv.gz"),
    SuiteTrace("synthetic", "synthetic"),
)
ROBUSTNESS_TRACES = (
    *(SuiteTrace(f"Philly ×{scale:g}", "philly", scale=scale) for scale in (0.2, 0.3)),
    *(SuiteTrace(f"synthetic seed {seed}", "synthetic", seed=seed) for seed in (2, 3, 4, 5)),
    *(SuiteTrace(f"ITP {name}, 6 teams", f"{name}.csv.gz", teams=6) for name in ("cluster02", "cluster03", "cluster07")),
    *(SuiteTrace(f"ITP {name}, load 0.95", f"{name}.csv.gz", load=0.95) for name in ("cluster07", "cluster03")),
)
"""Beyond the suite: the same kinds of trace with other fleet sizes, seeds, teams and loads, where a rule tuned on the
suite's rows must hold too (`--suite robustness`). Philly at ×0.2 and ×0.3 since stop 29: its teams' quotas differ
eightfold, as no other trace's do, and a small team's wait beside the big ones is what they test."""
SETS = {"standard": TRACES, "robustness": ROBUSTNESS_TRACES}


class SuiteError(ValueError):
    pass


def default_traces_dir() -> Path:
    return Path(__file__).resolve().parents[2] / ITP_DIR


def check_traces_dir(traces_dir: Path, traces: tuple[SuiteTrace, ...] = TRACES) -> None:
    missing = sorted({t.source for t in traces if t.source.endswith(".gz") and not (traces_dir / t.source).is_file()})
    if missing:
        raise SuiteError(
            f"the suite's ITP traces are missing from {traces_dir}: {', '.join(missing)} "
            f"(pass --traces-dir, the directory holding Microsoft's ITP traces as shipped with ElasticFlow)"
        )


@lru_cache(maxsize=4)
def _scenario(trace: SuiteTrace, traces_dir: str, checkpoint_s: int | None, replica: int = 0) -> Scenario:
    path = trace.source if trace.source in ("philly", "synthetic") else str(Path(traces_dir) / trace.source)
    scenario = build_scenario(path, scale=trace.scale, checkpoint_interval_s=checkpoint_s, teams=trace.teams,
                              load=trace.load, seed=trace.seed)
    if replica:
        scenario = replace(scenario, trace=jittered(scenario.trace, seed=replica, within_s=JITTER_S))
    return scenario


def _run_one(task: tuple) -> tuple:
    trace, checkpoint_s, policy_name, traces_dir, replica, overrides = task
    scenario = _scenario(trace, traces_dir, checkpoint_s, replica)
    policy = get_policy(policy_name)
    result = simulate(scenario, with_overrides(policy, overrides) if policy_name == UNDER_TEST else policy)
    summary = summarize(result)
    summary.pop("timeline")
    summary["scenario"] = {"name": scenario.name, "jobs": len(scenario.trace.jobs), "nodes": len(scenario.fleet.nodes),
                           "gpus": scenario.fleet.gpus, "teams": len(scenario.trace.teams)}
    return task, summary


def tasks(traces_dir: Path, policies: tuple[str, ...], traces: tuple[SuiteTrace, ...] = TRACES,
          replicas: int = 1, overrides: tuple[str, ...] = ()) -> list[tuple]:
    """Per replica: one run per trace and yardstick; one per trace and checkpoint setting for preempting policies."""
    result = []
    for replica in range(replicas):
        for trace in traces:
            for name in policies:
                preempts = POLICIES[name].config.preemption_enabled
                for checkpoint_s in CHECKPOINTS_S if preempts else (None,):
                    result.append((trace, checkpoint_s, name, str(traces_dir), replica, overrides))
    return result


def run_suite(
    traces_dir: Path | None = None,
    *,
    policies: tuple[str, ...] = tuple(POLICIES),
    traces: tuple[SuiteTrace, ...] = TRACES,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
    replicas: int = 1,
    overrides: tuple[str, ...] = (),
) -> dict:
    """The table's rows are the traces as logged. With `replicas` > 1, every row also gets the figures of
    `replicas` − 1 jittered copies (`JITTER_S`), so a ratio can be read with its spread. `overrides` (`FIELD=VALUE`)
    change gangway's SchedulerConfig only: the yardsticks stay as they are."""
    if replicas < 1:
        raise SuiteError(f"--replicas must be at least 1, got {replicas}")
    overrides = tuple(overrides)
    with_overrides(POLICIES[UNDER_TEST], overrides)  # a bad override fails here, not in a worker
    traces_dir = Path(traces_dir) if traces_dir is not None else default_traces_dir()
    check_traces_dir(traces_dir, traces)
    for name in (BASELINE, "fifo-isolated", UNDER_TEST):
        if name not in policies:
            policies = (*policies, name)
    todo = tasks(traces_dir, policies, traces, replicas, overrides)
    # The longest runs first, so the pool's last minutes are not one worker alone on Philly.
    todo.sort(key=lambda task: (task[0].source != "philly", task[2] != UNDER_TEST))
    done: dict[tuple, dict] = {}
    workers = workers or min(len(todo), os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for task, summary in pool.map(_run_one, todo):
            done[(task[0], task[1], task[2], task[4])] = summary
            if progress is not None:
                copy = f" / replica {task[4]}" if task[4] else ""
                progress(f"{task[0].name} / checkpoints {task[1] or 'none'} / {task[2]}{copy}: "
                         f"{summary['wall_s']:.0f}s wall, mean wait {summary['mean_wait_s']:,.0f}s")

    def runs_of(trace: SuiteTrace, checkpoint_s: int | None, replica: int) -> dict[str, dict]:
        runs = {}
        for name in policies:
            preempts = POLICIES[name].config.preemption_enabled
            runs[name] = done[(trace, checkpoint_s if preempts else None, name, replica)]
        add_fairness(runs)
        return runs

    rows = []
    for trace in traces:
        for checkpoint_s in CHECKPOINTS_S:
            runs = runs_of(trace, checkpoint_s, 0)
            row = {"trace": trace.name, "source": trace.source, "scale": trace.scale,
                   "checkpoint_interval_s": checkpoint_s, "scenario": runs[BASELINE]["scenario"], "policies": runs}
            if replicas > 1:
                row["replicas"] = [replica_figures(row, policies)] + [
                    replica_figures({"policies": runs_of(trace, checkpoint_s, k)}, policies) for k in range(1, replicas)
                ]
            rows.append(row)
    document = {"traces_dir": str(traces_dir), "policies": list(policies), "config_overrides": list(overrides), "rows": rows,
                "geomean_mean_wait_ratio": geomeans(rows, policies)}
    if replicas > 1:
        document |= {"replicas": replicas, "jitter_s": JITTER_S, "geomean_by_replica": replica_geomeans(rows, policies)}
    return document


def replica_figures(row: dict, policies: tuple[str, ...]) -> dict:
    """What the table reads of one replica of a row: every policy's mean-wait ratio, gangway's p99 ratio, its worst
    team's wait × fifo-isolated's and its GPU-hours lost."""
    mine = row["policies"][UNDER_TEST]
    return {
        "mean_wait_ratio": {name: ratio(row, name) for name in policies if name != BASELINE},
        "p99_wait_ratio": ratio(row, UNDER_TEST, "p99_wait_s"),
        "worst_team_vs_fifo_isolated": worst_team(mine)[1],
        "gpu_hours_lost_pct": lost_pct(mine),
    }


def replica_geomeans(rows: list[dict], policies: tuple[str, ...]) -> dict[str, list[float]]:
    """Per policy: the geometric mean over rows of its mean-wait ratio, one per replica."""
    count = len(rows[0]["replicas"]) if rows else 0
    return {
        name: [_geomean([row["replicas"][k]["mean_wait_ratio"][name] for row in rows]) for k in range(count)]
        for name in policies if name != BASELINE
    }


def ratio(row: dict, policy: str, metric: str = "mean_wait_s") -> float:
    base = row["policies"][BASELINE][metric]
    value = row["policies"][policy][metric]
    if base == 0:
        return 1.0 if value == 0 else math.inf
    return value / base


def geomeans(rows: list[dict], policies: tuple[str, ...]) -> dict[str, float]:
    """Per policy: the geometric mean over rows of its mean wait / kueue-like's (a zero wait counts as 1e-3×)."""
    return {name: _geomean([ratio(row, name) for row in rows]) for name in policies}


def _geomean(ratios: list[float]) -> float:
    logs = [math.log(max(value, 1e-3)) for value in ratios]
    return math.exp(sum(logs) / len(logs)) if logs else 1.0


def lost_pct(summary: dict) -> float:
    served = summary["gpu_hours_served"]
    return 100 * summary["gpu_hours_lost"] / served if served else 0.0


def worst_team(summary: dict) -> tuple[str, float]:
    ratios = summary.get("wait_vs_fifo_isolated") or {}
    team, value = max(ratios.items(), key=lambda kv: kv[1], default=("-", float("nan")))
    return team, value


def suite_rows(document: dict, policies: tuple[str, ...] = tuple(POLICIES)) -> list[list[str]]:
    """Header, one line per trace × checkpointing (gangway's figures, kueue-like's, every policy's ratio
    to kueue-like), then the geometric means. With replicas, three more columns: gangway's mean-wait ratio,
    p99 ratio and worst team over the replicas, each as its mean and 95 % interval."""
    others = [name for name in policies if name != BASELINE]
    replicas = document.get("replicas", 1)
    spread = [f"×kueue, {replicas} runs", f"p99 ×kueue, {replicas} runs", f"worst ×iso, {replicas} runs"]
    header = ["trace", "ckpt", "kueue mean", "kueue p99", "gangway mean", "p50", "p99", "mean JCT",
              "worst team ×iso", "preempt", "GPU-h lost", *(f"{name} ×kueue" for name in others), "p99 ×kueue",
              *(spread if replicas > 1 else ())]
    lines = [header]
    for row in document["rows"]:
        base, mine = row["policies"][BASELINE], row["policies"][UNDER_TEST]
        team, worst = worst_team(mine)
        line = [
            row["trace"],
            "30 min" if row["checkpoint_interval_s"] else "none",
            f"{base['mean_wait_s']:,.0f}",
            f"{base['p99_wait_s']:,.0f}",
            f"{mine['mean_wait_s']:,.0f}",
            f"{mine['p50_wait_s']:,.0f}",
            f"{mine['p99_wait_s']:,.0f}",
            f"{mine['mean_jct_s']:,.0f}",
            f"{worst:.2f} ({team})",
            f"{mine['preemptions']:,}",
            f"{mine['gpu_hours_lost']:,.0f} ({lost_pct(mine):.1f}%)",
            *(f"{ratio(row, name):.2f}" for name in others),
            f"{ratio(row, UNDER_TEST, 'p99_wait_s'):.2f}",
        ]
        if replicas > 1:
            copies = row["replicas"]
            line += [
                _interval([copy["mean_wait_ratio"][UNDER_TEST] for copy in copies]),
                _interval([copy["p99_wait_ratio"] for copy in copies]),
                _interval([copy["worst_team_vs_fifo_isolated"] for copy in copies]),
            ]
        lines.append(line)
    geo = document["geomean_mean_wait_ratio"]
    last = ["geometric mean", *([""] * 9), "", *(f"{geo[name]:.2f}" for name in others), ""]
    if replicas > 1:
        last += [_interval(document["geomean_by_replica"][UNDER_TEST]), "", ""]
    lines.append(last)
    return lines


def _interval(values: list[float]) -> str:
    """The mean over replicas and its 95 % interval (Student's t), cut at 0: every figure shown is a ratio."""
    spread = estimate(values)
    return f"{spread.mean:.2f} ({max(spread.low, 0.0):.2f}–{spread.high:.2f})"


def suite_table(document: dict, policies: tuple[str, ...] = tuple(POLICIES)) -> str:
    lines = suite_rows(document, policies)
    widths = [max(len(line[k]) for line in lines) for k in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(w) if k < 2 else cell.rjust(w) for k, (cell, w) in enumerate(zip(line, widths)))
           for line in lines]
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([out[0], rule, *out[1:-1], rule, out[-1]])


def markdown_suite_table(document: dict, policies: tuple[str, ...] = tuple(POLICIES)) -> str:
    lines = suite_rows(document, policies)
    out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += ["| " + " | ".join(line) + " |" for line in lines[1:]]
    return "\n".join(out)
