"""Assemble a replay scenario from the CLI's inputs: trace, fleet, quotas, scale."""

from __future__ import annotations

import gzip
from pathlib import Path

from scheduling.simulation.engine import Scenario
from scheduling.simulation.fleet import (
    FleetError,
    equal_quotas,
    fleet_for_load,
    load_fleet,
    load_quotas,
    nodes_for_load,
    philly_fleet,
)
from scheduling.simulation.synthetic import synthetic_trace
from scheduling.simulation.trace import (
    ITP_COLUMNS,
    PHILLY_FROM,
    PHILLY_TO,
    Trace,
    load_csv,
    load_itp,
    load_philly,
    philly_vc_nodes,
)

SYNTHETIC = "synthetic"


def build_scenario(
    trace: str = "philly",
    *,
    fleet: str | Path | None = None,
    quotas: str | Path | None = None,
    scale: float = 1.0,
    date_from: str | None = None,
    date_to: str | None = None,
    checkpoint_interval_s: int | None = None,
    teams: int | None = None,
    load: float | None = None,
    seed: int = 1,
) -> Scenario:
    """`trace` is "philly", "synthetic" (seeded by `seed`), or the path of a job CSV: the generic shape, or
    the ITP shape (`job_id, submission_time, duration, num_gpu`; teams hashed from job_id into `teams`).

    `load` sizes a fleet instead of `fleet`: 8-GPU nodes in 2 blocks of 8 racks, as many as make the
    trace's average demand `load` of capacity (the default for ITP and synthetic traces: 0.85).

    Philly without `--fleet`: 8-GPU nodes per VC (the Helios artifact's VC sizes), quotas = VC sizes.
    Otherwise the fleet comes from `fleet` (a fleet file or an openb node list) and the quotas from
    `quotas`, or equal shares of every flavor among the trace's teams, all in one cohort.
    """
    if not scale > 0:
        raise ValueError(f"--scale must be > 0, got {scale}")
    if trace == "philly":
        vcs = philly_vc_nodes()
        loaded = load_philly(vcs=vcs, date_from=date_from or PHILLY_FROM, date_to=date_to or PHILLY_TO)
        name = f"Philly {date_from or PHILLY_FROM}..{date_to or PHILLY_TO}, scale {scale:g}"
        if fleet is None:
            built, vc_quotas = philly_fleet(vcs, scale=scale)
            team_quotas = {vc: {built.main_flavor: gpus} for vc, gpus in vc_quotas.items()}
        else:
            built, team_quotas = load_fleet(fleet, scale=scale), None
    else:
        if date_from or date_to:
            raise ValueError("--from/--to apply to the Philly trace only")
        sized_by_load = True  # neither log records its fleet
        if trace == SYNTHETIC:
            loaded, name = synthetic_trace(teams=teams or 8, seed=seed), f"synthetic seed {seed}"
        elif _is_itp(trace):
            loaded, name = load_itp(trace, teams=teams or 4), Path(trace).name.split(".")[0]
        else:
            if teams is not None:
                raise ValueError("--teams applies to traces without a team column (ITP-shaped, synthetic)")
            loaded, name, sized_by_load = load_csv(trace), f"{Path(trace).name}, scale {scale:g}", load is not None
        if fleet is not None and load is not None:
            raise ValueError("--load sizes a fleet; it does not apply with --fleet")
        if fleet is not None:
            built, team_quotas = load_fleet(fleet, scale=scale), None
        elif sized_by_load:
            load = DEFAULT_LOAD if load is None else load
            built, team_quotas, name = _fleet_for(loaded, load), None, f"{name}, load {load:g}"
        else:
            raise ValueError("a CSV trace needs --fleet (a fleet file or a node list CSV) or --load")
    if quotas is not None:
        team_quotas = load_quotas(quotas, flavor=built.main_flavor, scale=scale)
    elif team_quotas is None:
        team_quotas = equal_quotas(loaded.teams, built)
    unknown = sorted({job.team for job in loaded.jobs} - set(team_quotas))
    if unknown and quotas is not None:
        raise FleetError(f"{quotas}: no quota for team(s) {', '.join(unknown)} of the trace")
    return Scenario(loaded, built, team_quotas, checkpoint_interval_s=checkpoint_interval_s, name=name)


DEFAULT_LOAD = 0.85


def _fleet_for(trace: Trace, load: float):
    span_s = max((job.submit_s for job in trace.jobs), default=0.0)
    largest = max((job.gpus for job in trace.jobs), default=1)
    return fleet_for_load(nodes_for_load(trace.gpu_seconds, span_s, largest, load))


def _is_itp(path: str) -> bool:
    """A CSV whose header has the ITP columns (gzip allowed)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as handle:
        header = {name.strip() for name in handle.readline().split(",")}
    return set(ITP_COLUMNS[1:]) <= header
