"""The gaming scenario: does a team that games the scheduler gain anything? (`simulate --scenario gaming`)

Eight teams share 1,024 GPUs (8-GPU nodes in 2 blocks × 4 racks × 16 nodes, the demo's H100 part) with
equal nominal quotas in one cohort, on a seeded synthetic half day (heavy-tailed durations, multi-node gangs;
`synthetic.py`) whose jobs ask for more GPU-hours than the fleet has, every job checkpointing every 30 min.
Each run makes one team (`GAMER`) play one strategy on the same trace; everything else is identical:

| strategy | what the gaming team does |
|---|---|
| honest | nothing |
| split | every job of more than 8 GPUs becomes 8-GPU jobs (a job is done when its last piece is) |
| inflate | every job at the highest priority class it may use (`high`) |
| placeholders | an hour before each job of 8+ GPUs, a job of its size that starts, idles and is cancelled when the real one comes |
| hoard | every job keeps its GPUs, idle (< 10 % use), for 4 hours after its work |
| squat | its jobs never checkpoint, so taking back the quota they borrow loses whole runs |
| queues | its jobs spread over 4 queues, its quota split between them |

Measured against the honest run (same seed): the gaming team's GPU-hours of work done by the end of the
submissions and its mean wait (a split job waits until its last piece starts; placeholders are not jobs),
and the other teams' mean wait. Run with the defences (the default policy and the admin's optional ones) and
without them, over several seeds (one seed's waits move by more than 5 % whatever anyone does).
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Callable

from scheduling.core.model import Node
from scheduling.simulation.engine import Scenario, SimResult, simulate
from scheduling.simulation.fleet import Fleet
from scheduling.simulation.policies import POLICIES, Policy
from scheduling.simulation.synthetic import synthetic_trace
from scheduling.simulation.trace import Trace, TraceJob

GAMER = "team0"
TEAMS = 8
FLAVOR = "H100-80GB"
NODE_GPUS = 8
JOBS_PER_DAY = 5_500
DAYS = 0.5
"""2,750 jobs asking 1.5–1.8× the fleet's GPU-seconds over their submission span (the long tail runs on): a
replay takes about a minute. Denser days make waits longer and ratios steadier, at minutes per replay."""
CHECKPOINT_INTERVAL_S = 1800
PRIORITY_CLASSES = {"normal": 0, "high": 10}
"""The demo's classes: every team may use `high`, at most HIGH_CAP_GPUS at once."""
HIGH_CAP_GPUS = 64
PLACEHOLDER_LEAD_S = 3600.0
HOARD_S = 4 * 3600.0
EXTRA_QUEUES = 4
MARGIN = 0.05
"""The issue's bar: no strategy may gain the gamer, or cost the others, more than 5 %."""


def gaming_fleet() -> Fleet:
    nodes = []
    for block in ("b1", "b2"):
        for rack in range(1, 5):
            for _ in range(16):
                name = f"h100-{len(nodes) + 1:04d}"
                nodes.append(Node(name, FLAVOR, NODE_GPUS, NODE_GPUS, {"block": block, "rack": f"{block}-r{rack:02d}"}))
    return Fleet(("block", "rack"), tuple(nodes))


def gaming_trace(seed: int = 1) -> Trace:
    trace = synthetic_trace(jobs=round(JOBS_PER_DAY * DAYS), days=DAYS, teams=TEAMS, seed=seed)
    return replace(trace, jobs=tuple(replace(job, flavor=FLAVOR, priority_class="normal") for job in trace.jobs))


# --- strategies: the gamer's jobs rewritten, the rest untouched --------------------------------------------------


def _rewrite(trace: Trace, rewrite: Callable[[TraceJob, Callable[[], int]], list[TraceJob]]) -> Trace:
    """Each of the gamer's jobs replaced by what `rewrite` makes of it (given a source of new ids), in submit order."""
    next_id = max(job.id for job in trace.jobs)

    def new_id() -> int:
        nonlocal next_id
        next_id += 1
        return next_id

    jobs: list[TraceJob] = []
    for job in trace.jobs:
        jobs.extend(rewrite(job, new_id) if job.team == GAMER else [job])
    jobs.sort(key=lambda job: (job.submit_s, job.id))
    return replace(trace, jobs=tuple(jobs))


def split(job: TraceJob, new_id) -> list[TraceJob]:
    if job.gpus <= NODE_GPUS:
        return [job]
    pieces = []
    for start in range(0, job.gpus, NODE_GPUS):
        gpus = min(NODE_GPUS, job.gpus - start)
        pieces.append(replace(job, id=job.id if not start else new_id(), gpus=gpus, stands_for=job.id))
    return pieces


def inflate(job: TraceJob, new_id) -> list[TraceJob]:
    return [replace(job, priority_class="high", priority=PRIORITY_CLASSES["high"])]


def placeholders(job: TraceJob, new_id) -> list[TraceJob]:
    if job.gpus < NODE_GPUS or job.submit_s < PLACEHOLDER_LEAD_S:
        return [job]
    holder = replace(job, id=new_id(), submit_s=job.submit_s - PLACEHOLDER_LEAD_S, duration_s=0.0,
                     idle_hold_s=PLACEHOLDER_LEAD_S, cancel_at_s=job.submit_s, stands_for=job.id)
    return [holder, job]


def hoard(job: TraceJob, new_id) -> list[TraceJob]:
    return [replace(job, idle_hold_s=HOARD_S)]


def squat(job: TraceJob, new_id) -> list[TraceJob]:
    return [replace(job, checkpoint_interval_s=0)]


def queues(job: TraceJob, new_id) -> list[TraceJob]:
    return [replace(job, queue=_extra_queue(job.id % EXTRA_QUEUES))]


def _extra_queue(k: int) -> str:
    return GAMER if k == 0 else f"{GAMER}-{k}"


STRATEGIES: dict[str, Callable | None] = {
    "honest": None, "split": split, "inflate": inflate, "placeholders": placeholders, "hoard": hoard,
    "squat": squat, "queues": queues,
}


def gaming_scenario(strategy: str, *, seed: int = 1, trace: Trace | None = None) -> Scenario:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    fleet = gaming_fleet()
    base = trace or gaming_trace(seed)
    rewrite = STRATEGIES[strategy]
    played = base if rewrite is None else _rewrite(base, rewrite)
    share = fleet.gpus // TEAMS
    quotas: dict[str, dict[str, int]] = {f"team{k}": {FLAVOR: share} for k in range(TEAMS)}
    queue_teams: dict[str, str] = {}
    if strategy == "queues":
        per_queue, extra = divmod(share, EXTRA_QUEUES)
        for k in range(EXTRA_QUEUES):
            quotas[_extra_queue(k)] = {FLAVOR: per_queue + (1 if k < extra else 0)}
            queue_teams[_extra_queue(k)] = GAMER
    return Scenario(played, fleet, quotas, checkpoint_interval_s=CHECKPOINT_INTERVAL_S, name=f"gaming: {GAMER} {strategy}",
                    queue_teams=queue_teams, priority_class_caps={"high": HIGH_CAP_GPUS})


# --- policies: the default, and the same without the defences ---------------------------------------------------


def defended_policy() -> Policy:
    """The default policy, and the admin's two optional policies: suspend idle jobs while others wait, and reclaim
    borrowed quota from jobs that ran on it for two hours without checkpoints at their displacement cost."""
    gangway = POLICIES["gangway"]
    return replace(gangway, name="defended", config=replace(gangway.config, **ADMIN_POLICIES))


ADMIN_POLICIES = {"suspend_idle_jobs": True, "reclaim_at_cost_after_s": 7200.0}


def undefended_policy() -> Policy:
    """The default policy with the gaming defences off: no idle flags, per-queue accounts, squatting weighed like any
    reclaim, no class caps (run_strategy drops them)."""
    gangway = POLICIES["gangway"]
    return replace(gangway, name="undefended", config=replace(gangway.config, **UNDEFENDED))


UNDEFENDED = {"idle_grace_s": math.inf, "fair_share_per_team": False, "reclaim_at_cost_after_s": None}


# --- measuring -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    gamer_gpu_hours: float
    """GPU-hours of the gamer's work done by the last submission (placeholders' and idle holds' time is no work)."""
    gamer_mean_wait_s: float
    others_mean_wait_s: float
    preemptions: int
    wall_s: float


def outcome(scenario: Scenario, result: SimResult) -> Outcome:
    jobs = {job.id: job for job in scenario.trace.jobs}
    horizon = result.horizon_s
    work_gpu_s = 0.0
    gamer_waits: dict[int, float] = {}
    others: list[float] = []
    for record in result.records.values():
        job = jobs[record.id]
        if record.rejected or job.duration_s == 0:  # refused, or a placeholder
            continue
        if record.team != GAMER:
            if record.end_s is not None:
                others.append(record.waited_s)
            continue
        if record.work_end_s is not None and record.work_end_s <= horizon:
            work_gpu_s += record.gpus * job.duration_s
        stands_for = job.stands_for or job.id
        gamer_waits[stands_for] = max(gamer_waits.get(stands_for, 0.0), record.waited_s)
    return Outcome(
        gamer_gpu_hours=work_gpu_s / 3600.0,
        gamer_mean_wait_s=sum(gamer_waits.values()) / max(1, len(gamer_waits)),
        others_mean_wait_s=sum(others) / max(1, len(others)),
        preemptions=result.preemptions,
        wall_s=result.wall_s,
    )


def run_strategy(strategy: str, policy_name: str, *, seed: int = 1) -> Outcome:
    policy = defended_policy() if policy_name == "defended" else undefended_policy()
    scenario = gaming_scenario(strategy, seed=seed)
    if policy_name == "undefended":
        scenario = replace(scenario, priority_class_caps={})
    return outcome(scenario, simulate(scenario, policy))


def run_gaming(*, seeds: tuple[int, ...] = (1,), strategies: tuple[str, ...] = tuple(STRATEGIES), with_undefended: bool = True,
               workers: int | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """Every strategy on every seed under the defended policy (and the undefended one), `workers` runs at once. Each
    figure is the mean over the seeds; each ratio is to the honest run's mean under the same policy."""
    policies = ["defended"] + (["undefended"] if with_undefended else [])
    played = ("honest",) + tuple(s for s in strategies if s != "honest")
    runs = [(policy, strategy, seed) for policy in policies for strategy in played for seed in seeds]
    outcomes: dict[tuple[str, str, int], Outcome] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_strategy, strategy, policy, seed=seed): (policy, strategy, seed) for policy, strategy, seed in runs}
        for future in as_completed(futures):
            outcomes[futures[future]] = future.result()
            if progress is not None:
                progress(f"{' '.join(map(str, futures[future]))}: {outcomes[futures[future]].wall_s:.0f}s wall")
    document: dict = {"seeds": list(seeds), "gamer": GAMER, "jobs": round(JOBS_PER_DAY * DAYS), "gpus": gaming_fleet().gpus,
                      "policies": {}, "per_seed": {}}
    for policy in policies:
        mean = {strategy: _mean([outcomes[(policy, strategy, seed)] for seed in seeds]) for strategy in played}
        document["policies"][policy] = {strategy: _row(mean[strategy], mean["honest"]) for strategy in played}
        document["per_seed"][policy] = {
            strategy: {seed: _row(outcomes[(policy, strategy, seed)], outcomes[(policy, "honest", seed)]) for seed in seeds}
            for strategy in played
        }
    return document


def _mean(outcomes: list[Outcome]) -> Outcome:
    n = len(outcomes)
    return Outcome(*(sum(getattr(o, name) for o in outcomes) / n for name in Outcome.__dataclass_fields__))


def _row(o: Outcome, honest: Outcome) -> dict:
    gain_h = _ratio(o.gamer_gpu_hours, honest.gamer_gpu_hours)
    wait = _ratio(o.gamer_mean_wait_s, honest.gamer_mean_wait_s)
    others = _ratio(o.others_mean_wait_s, honest.others_mean_wait_s)
    return {
        "gamer_gpu_hours": o.gamer_gpu_hours, "gamer_gpu_hours_x": gain_h,
        "gamer_mean_wait_s": o.gamer_mean_wait_s, "gamer_wait_x": wait,
        "others_mean_wait_s": o.others_mean_wait_s, "others_wait_x": others,
        "preemptions": o.preemptions, "wall_s": o.wall_s,
        "gains": gain_h > 1 + MARGIN or wait < 1 - MARGIN or others > 1 + MARGIN,
    }


def _ratio(value: float, base: float) -> float:
    if base == 0:
        return 1.0 if value == 0 else math.inf
    return value / base


def gaming_table(document: dict) -> str:
    """One row per policy and strategy (means over the seeds); the wait ratios of each seed alone in the last column."""
    header = ["policy", "strategy", "gamer GPU-h", "×honest", "gamer mean wait s", "×honest", "others' mean wait s",
              "×honest", "preempt", "gains > 5 %?", "per seed: gamer wait ×, others' wait ×"]
    rows = [header]
    per_seed = document.get("per_seed", {})
    for policy, by_strategy in document["policies"].items():
        for strategy, r in by_strategy.items():
            seeds = per_seed.get(policy, {}).get(strategy, {})
            spread = " ".join(f"{s['gamer_wait_x']:.2f}/{s['others_wait_x']:.2f}" for s in seeds.values())
            rows.append([policy, strategy, f"{r['gamer_gpu_hours']:,.0f}", f"{r['gamer_gpu_hours_x']:.3f}",
                         f"{r['gamer_mean_wait_s']:,.0f}", f"{r['gamer_wait_x']:.3f}", f"{r['others_mean_wait_s']:,.0f}",
                         f"{r['others_wait_x']:.3f}", f"{r['preemptions']:,.0f}", "YES" if r["gains"] else "no", spread])
    widths = [max(len(row[k]) for row in rows) for k in range(len(header))]
    lines = ["  ".join(c.ljust(w) if k < 2 or k == len(row) - 1 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
