"""The policies a replay compares. Each is only data for the one core: queues, config, job fields.

| policy | queues | order | placement | preemption |
|---|---|---|---|---|
| `fifo-isolated` | one per team, no cohort; every team gets its own partition of whole nodes (a taint per team that only its jobs tolerate) | strict FIFO | topology-aware inside the partition | none |
| `kueue-like` | one per team, one cohort, borrowing unlimited | best-effort FIFO (dominant share across queues; no usage history) | first fit by node name, no topology | none |
| `gangway` | one per team, one cohort, borrowing unlimited | best-effort FIFO, fair share with usage decayed over a half-life | topology- and fragmentation-aware | reclaim of borrowed capacity, cheapest displacement first; the plans are approved (the simulated admin approves every plan) |
| `sjf-oracle` | one queue for everybody, the whole fleet | priority = −true duration (clairvoyant shortest job first) | topology-aware | none |

`sjf-oracle` knows what no scheduler knows; it is a reference line, not a policy to run. The three
yardsticks keep the rules they were measured with (issue 10): a new rule of the default policy that
would change them is turned off here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping, Sequence

from scheduling.core.model import (
    Node,
    PreemptionPolicy,
    Queue,
    QueueingStrategy,
    Quota,
    SchedulerConfig,
    Taint,
    Toleration,
)
from scheduling.simulation.fleet import PARTITION_TAINT, Fleet
from scheduling.simulation.trace import TraceJob

COHORT = "shared"
ALL = "all"


@dataclass(frozen=True)
class Policy:
    name: str
    config: SchedulerConfig = SchedulerConfig()
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: PreemptionPolicy = PreemptionPolicy.NEVER
    cohort: str | None = COHORT
    """None: every queue alone (no borrowing)."""
    partitioned: bool = False
    """Each team's jobs run only on its own nodes (a taint per team)."""
    single_queue: bool = False
    oracle: bool = False
    """Priority = −true duration (shortest first)."""
    fair_share_history: bool = False
    """Pass decayed per-queue usage to the core (Snapshot.historical_usage)."""
    approve: str = "none"
    """Which preemption plans that need an admin's approval the simulated admin approves: none | all."""
    description: str = ""

    # --- the data the core sees ------------------------------------------------------------

    def queue_of(self, team: str) -> str:
        return ALL if self.single_queue else team

    def queues(self, quotas: Mapping[str, Mapping[str, int]], teams: Mapping[str, str] | None = None) -> dict[str, Queue]:
        """One queue per key of `quotas`, of the team `teams` names for it (default: the team of that name)."""
        if self.single_queue:
            totals: dict[str, int] = {}
            for per_flavor in quotas.values():
                for flavor, gpus in per_flavor.items():
                    totals[flavor] = totals.get(flavor, 0) + gpus
            return {ALL: self._queue(ALL, ALL, totals)}
        teams = teams or {}
        return {name: self._queue(name, teams.get(name, name), per_flavor) for name, per_flavor in quotas.items()}

    def _queue(self, name: str, team: str, per_flavor: Mapping[str, int]) -> Queue:
        return Queue(
            name=name,
            team=team,
            cohort=self.cohort,
            strategy=self.strategy,
            preemption=self.preemption,
            quotas={flavor: Quota(nominal=gpus) for flavor, gpus in per_flavor.items()},
        )

    def priority(self, job: TraceJob) -> int:
        return -int(job.duration_s) if self.oracle else job.priority

    def tolerations(self, team: str) -> tuple[Toleration, ...]:
        return (Toleration(PARTITION_TAINT, "Equal", team, "NoSchedule"),) if self.partitioned else ()

    def nodes(self, fleet: Fleet, quotas: Mapping[str, Mapping[str, int]]) -> tuple[Node, ...]:
        if not self.partitioned:
            return fleet.nodes
        owners = dict(fleet.owners) if fleet.owners else partition(fleet, quotas)
        return tuple(
            replace(node, taints=(*node.taints, Taint(PARTITION_TAINT, owners.get(node.name, "-"), "NoSchedule")))
            for node in fleet.nodes
        )


def partition(fleet: Fleet, quotas: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """Whole nodes to teams, in name order, until each team's nodes hold its quota (leftovers: nobody's)."""
    owners: dict[str, str] = {}
    by_flavor: dict[str, list[Node]] = {}
    for node in sorted(fleet.nodes, key=lambda n: n.name):
        by_flavor.setdefault(node.flavor, []).append(node)
    for flavor, nodes in by_flavor.items():
        it = iter(nodes)
        for team in sorted(quotas):
            need = quotas[team].get(flavor, 0)
            while need > 0:
                node = next(it, None)
                if node is None:
                    break
                owners[node.name] = team
                need -= node.allocatable_gpus
    return owners


POLICIES: dict[str, Policy] = {
    "fifo-isolated": Policy(
        "fifo-isolated",
        config=SchedulerConfig(preemption_enabled=False, single_pods_fleet_wide=False),
        strategy=QueueingStrategy.STRICT_FIFO,
        cohort=None,
        partitioned=True,
        description="each team its own node partition, strict FIFO, no borrowing (the Helios artifact's setting)",
    ),
    "kueue-like": Policy(
        "kueue-like",
        config=SchedulerConfig(topology_aware=False, preemption_enabled=False, starvation_after_s=None,
                               uncheckpointed_borrowers_last=False),
        description="one cohort with borrowing, best-effort FIFO, first-fit placement, no preemption",
    ),
    "gangway": Policy(
        "gangway",
        config=SchedulerConfig(),
        preemption=PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM,
        fair_share_history=True,
        approve="all",
        description="cohort borrowing, fair share with decayed usage, topology/fragmentation-aware placement, "
        "reclaim of borrowed capacity by displacement cost",
    ),
    "sjf-oracle": Policy(
        "sjf-oracle",
        config=SchedulerConfig(preemption_enabled=False, starvation_after_s=None, single_pods_fleet_wide=False),
        single_queue=True,
        oracle=True,
        description="clairvoyant shortest-job-first in one queue over the whole fleet (reference only)",
    ),
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None


def with_overrides(policy: Policy, overrides: Sequence[str]) -> Policy:
    """The policy with `FIELD=VALUE` overrides of its SchedulerConfig (`--set`), each value read as the field's
    default is typed: true/false, a number, `none` where the default is none, numbers separated by commas for a tuple."""
    if not overrides:
        return policy
    defaults = {f.name: getattr(policy.config, f.name) for f in fields(SchedulerConfig)}
    optional = {f.name for f in fields(SchedulerConfig) if "None" in str(f.type)}
    changes = {}
    for override in overrides:
        name, sep, text = override.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or name not in defaults:
            raise ValueError(f"--set {override!r}: expected FIELD=VALUE with FIELD one of {', '.join(sorted(defaults))}")
        try:
            changes[name] = _override_value(defaults[name], text, optional=name in optional)
        except ValueError as error:
            raise ValueError(f"--set {name}={text}: {error}") from None
    return replace(policy, config=replace(policy.config, **changes))


def _override_value(default, text: str, *, optional: bool):
    lowered = text.lower()
    if isinstance(default, bool):
        if lowered in ("true", "on", "yes", "1"):
            return True
        if lowered in ("false", "off", "no", "0"):
            return False
        raise ValueError("expected true or false")
    if lowered == "none" and optional:
        return None
    try:
        if isinstance(default, tuple):
            return tuple(float(part) for part in text.split(",") if part.strip())
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float) or default is None:
            return float(text)
    except ValueError:
        raise ValueError("expected a whole number" if isinstance(default, int) else "expected a number") from None
    return text


def with_approval(policy: Policy, approve: str | None) -> Policy:
    if approve is None:
        return policy
    if approve not in ("none", "all"):
        raise ValueError(f"--approve must be none or all, got {approve!r}")
    return replace(policy, approve=approve)


__all__ = ["POLICIES", "Policy", "get_policy", "partition", "with_approval", "with_overrides"]
