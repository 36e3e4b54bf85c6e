"""Fleet reads: nodes with allocated and free GPUs, totals per flavor and per rack (finest topology level)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.db.models import IntegerField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from scheduling import clock
from scheduling.core.policy import policy_in_force
from scheduling.models import FleetSettings, Node, Placement, ReconcileState
from scheduling.models.jobs import HOLDING_STATES
from scheduling.snapshots import scheduler_config


def node_list() -> QuerySet:
    """Nodes annotated with `allocated_gpus` (held by admitted or running jobs), summed in the database."""
    return (
        Node.objects.select_related("flavor")
        .annotate(
            allocated_gpus=Coalesce(
                Sum("placements__gpus", filter=Q(placements__job__state__in=HOLDING_STATES)), Value(0), output_field=IntegerField()
            )
        )
        .order_by("name")
    )


def scheduling_policy() -> dict[str, str]:
    """The rules the reconcile pass applies, in words (the fleet page and `GET /api/v1/fleet/`)."""
    return policy_in_force(scheduler_config())


def node_free_gpus(node) -> int:
    """GPUs a new pod could use: zero on a node that is not ready or is cordoned."""
    if not node.is_ready or node.is_unschedulable:
        return 0
    return max(0, node.allocatable_gpus - node.allocated_gpus - node.external_gpus)


STORED_SUMMARY_FRESH_S = 300.0
"""A recorded summary is used while a pass ran in this time: every write that changes nodes or placements asks for a
pass, which records the change, so only a stopped worker would leave it stale (then it is computed per view)."""


@dataclass
class Totals:
    nodes: int = 0
    capacity_gpus: int = 0
    allocatable_gpus: int = 0
    allocated_gpus: int = 0
    external_gpus: int = 0
    free_gpus: int = 0
    whole_free_nodes: int = 0
    unavailable_nodes: int = 0

    def add(self, node) -> None:
        free = node_free_gpus(node)
        self.nodes += 1
        self.capacity_gpus += node.capacity_gpus
        self.allocatable_gpus += node.allocatable_gpus
        self.allocated_gpus += node.allocated_gpus
        self.external_gpus += node.external_gpus
        self.free_gpus += free
        self.whole_free_nodes += int(node.capacity_gpus > 0 and free == node.capacity_gpus)
        self.unavailable_nodes += int(not node.is_ready or node.is_unschedulable)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RackTotals(Totals):
    name: str = ""
    labels: dict = field(default_factory=dict)
    flavor: str = ""


@dataclass
class FleetSummary:
    topology: list[str]
    totals: Totals
    by_flavor: dict[str, Totals]
    racks: list[RackTotals]
    heatmap: dict = field(default_factory=dict)
    """Per node, one row per rack: free GPUs (-1 = not ready or cordoned), for the fragmentation heatmap."""

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> FleetSummary:
        return cls(topology=data["topology"], totals=Totals(**data["totals"]),
                   by_flavor={name: Totals(**totals) for name, totals in data["by_flavor"].items()},
                   racks=[RackTotals(**rack) for rack in data["racks"]], heatmap=data["heatmap"])


@dataclass(frozen=True, slots=True)
class NodeState:
    """What the fleet summary needs of a node: plain values, not a model instance (1,250 of them per page)."""

    name: str
    flavor: str
    capacity_gpus: int
    allocatable_gpus: int
    labels: dict
    is_ready: bool
    is_unschedulable: bool
    external_gpus: int
    allocated_gpus: int


def node_states() -> list[NodeState]:
    """Every node by name with the GPUs placed on it: two flat queries (a sum per node of the placements of jobs
    holding GPUs, and the nodes' columns), no join of nodes with every placement."""
    allocated = dict(
        Placement.objects.filter(job__state__in=HOLDING_STATES).values("node_id").annotate(gpus=Sum("gpus")).order_by()
        .values_list("node_id", "gpus")
    )
    rows = Node.objects.order_by("name").values_list(
        "pk", "name", "flavor__name", "capacity_gpus", "allocatable_gpus", "labels", "is_ready", "is_unschedulable", "external_gpus")
    return [NodeState(name, flavor, capacity, allocatable, labels or {}, is_ready, is_unschedulable, external, allocated.get(pk, 0))
            for pk, name, flavor, capacity, allocatable, labels, is_ready, is_unschedulable, external in rows]


def fleet_summary() -> FleetSummary:
    """As the last reconcile pass recorded it after a change of the nodes or of what holds GPUs (one row), while
    passes run; computed now otherwise (no pass in the last STORED_SUMMARY_FRESH_S, or none recorded yet)."""
    state = ReconcileState.objects.filter(pk=1).values_list("fleet_summary", "last_pass_at").first()
    if state is not None and state[0] and state[1] is not None and clock.now_s() - state[1].timestamp() < STORED_SUMMARY_FRESH_S:
        return FleetSummary.from_dict(state[0])
    return fleet_summary_compute()


def fleet_summary_compute() -> FleetSummary:
    """Two queries for the nodes and the GPUs placed on them, then totals per flavor and per rack."""
    levels = list(FleetSettings.load().topology_levels)
    totals, by_flavor, racks, cells = Totals(), {}, {}, {}
    for node in node_states():
        totals.add(node)
        by_flavor.setdefault(node.flavor, Totals()).add(node)
        labels = node.labels
        rack_name = labels.get(levels[-1], "") if levels else ""
        key = (tuple(labels.get(level, "") for level in levels), node.flavor)
        rack = racks.get(key)
        if rack is None:
            rack = racks[key] = RackTotals(
                name=rack_name or "(fleet)", labels={level: labels.get(level, "") for level in levels}, flavor=node.flavor
            )
        rack.add(node)
        cells.setdefault(key, []).append(_heatmap_cell(node))
    ordered = sorted(racks)
    return FleetSummary(
        topology=levels,
        totals=totals,
        by_flavor=dict(sorted(by_flavor.items())),
        racks=[racks[k] for k in ordered],
        heatmap=_heatmap([f"{racks[k].name} · {racks[k].flavor}" for k in ordered], [cells[k] for k in ordered]),
    )


def _heatmap_cell(node) -> tuple[int, str]:
    if not node.is_ready or node.is_unschedulable:
        state = "not ready" if not node.is_ready else "cordoned"
        return -1, f"{node.name}: {state}"
    free = node_free_gpus(node)
    health = f", {node.capacity_gpus - node.allocatable_gpus} unhealthy GPUs" if node.allocatable_gpus < node.capacity_gpus else ""
    return free, f"{node.name}: {free} of {node.allocatable_gpus} free{health}"


def _heatmap(rows: list[str], cells: list[list[tuple[int, str]]]) -> dict:
    """A rack with many partly free cells is fragmented: whole-node gangs cannot use its free GPUs."""
    width = max((len(row) for row in cells), default=0)
    pad = [(None, "")]
    return {
        "zmax": max((free for row in cells for free, _ in row), default=8),
        "y": rows,
        "x": [f"node {i + 1}" for i in range(width)],
        "z": [[free for free, _ in row + pad * (width - len(row))] for row in cells],
        "text": [[text for _, text in row + pad * (width - len(row))] for row in cells],
    }
