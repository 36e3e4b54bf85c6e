"""Assemble a replay scenario from the CLI's inputs: trace, fleet, quotas, scale."""

from __future__ import annotations

from pathlib import Path

from scheduling.simulation.engine import Scenario
from scheduling.simulation.fleet import FleetError, equal_quotas, load_fleet, load_quotas, philly_fleet
from scheduling.simulation.trace import PHILLY_FROM, PHILLY_TO, load_csv, load_philly, philly_vc_nodes


def build_scenario(
    trace: str = "philly",
    *,
    fleet: str | Path | None = None,
    quotas: str | Path | None = None,
    scale: float = 1.0,
    date_from: str | None = None,
    date_to: str | None = None,
    checkpoint_interval_s: int | None = None,
) -> Scenario:
    """`trace` is "philly" or the path of a generic job CSV.

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
        loaded = load_csv(trace)
        name = f"{Path(trace).name}, scale {scale:g}"
        if fleet is None:
            raise ValueError("a CSV trace needs --fleet (a fleet file or a node list CSV)")
        built, team_quotas = load_fleet(fleet, scale=scale), None
    if quotas is not None:
        team_quotas = load_quotas(quotas, flavor=built.main_flavor, scale=scale)
    elif team_quotas is None:
        team_quotas = equal_quotas(loaded.teams, built)
    unknown = sorted({job.team for job in loaded.jobs} - set(team_quotas))
    if unknown and quotas is not None:
        raise FleetError(f"{quotas}: no quota for team(s) {', '.join(unknown)} of the trace")
    return Scenario(loaded, built, team_quotas, checkpoint_interval_s=checkpoint_interval_s, name=name)
