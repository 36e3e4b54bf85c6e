"""Fleet writes: sync the Node rows and topology levels to a fleet file, in one transaction; record the fleet summary."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count

from scheduling.fleetfile import FleetFileError, FleetSpec
from scheduling.models import FleetSettings, Flavor, Node, ReconcileState
from scheduling.selectors.fleet import fleet_summary_compute
from scheduling.services.common import reconcile_after_commit


@dataclass
class FleetSyncResult:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


NODE_FIELDS = ["capacity_gpus", "allocatable_gpus", "labels", "taints", "is_ready", "is_unschedulable", "external_gpus"]


@transaction.atomic
def fleet_sync(*, fleet: FleetSpec) -> FleetSyncResult:
    """Add, update and remove nodes so the database matches `fleet`. Raises FleetFileError, changing nothing,
    when a node to remove (or to change flavor) holds a placement of a job that still runs there."""
    result = FleetSyncResult()
    existing = {node.name: node for node in Node.objects.select_related("flavor").annotate(
        active_pods=Count("placements", filter=_holding_filter())
    )}
    wanted = {spec.name: spec for spec in fleet.nodes}
    errors = []
    for name in sorted(set(existing) - set(wanted)):
        if existing[name].active_pods:
            errors.append(f"node {name!r}: cannot remove: it holds {existing[name].active_pods} pods of admitted jobs")
    for name, spec in wanted.items():
        node = existing.get(name)
        if node is not None and node.flavor.name != spec.flavor and node.active_pods:
            errors.append(f"node {name!r}: field 'flavor': cannot change while it holds {node.active_pods} pods of admitted jobs")
    if errors:
        raise FleetFileError(errors)

    flavors = {f.name: f for f in Flavor.objects.all()}
    for flavor_name in {spec.flavor for spec in fleet.nodes} - set(flavors):
        flavors[flavor_name] = Flavor.objects.create(name=flavor_name)
    to_create, to_update = [], []
    for name, spec in sorted(wanted.items()):
        values = {
            "capacity_gpus": spec.capacity_gpus,
            "allocatable_gpus": spec.allocatable_gpus,
            "labels": spec.labels,
            "taints": spec.taints,
            "is_ready": spec.is_ready,
            "is_unschedulable": spec.is_unschedulable,
            "external_gpus": spec.external_gpus,
        }
        node = existing.get(name)
        if node is None:
            to_create.append(Node(name=name, flavor=flavors[spec.flavor], **values))
            result.added.append(name)
        elif node.flavor.name != spec.flavor or any(getattr(node, k) != v for k, v in values.items()):
            node.flavor = flavors[spec.flavor]
            for key, value in values.items():
                setattr(node, key, value)
            to_update.append(node)
            result.updated.append(name)
    removed = sorted(set(existing) - set(wanted))
    Node.objects.filter(name__in=removed).delete()
    result.removed = removed
    Node.objects.bulk_create(to_create, batch_size=500)
    Node.objects.bulk_update(to_update, ["flavor", *NODE_FIELDS], batch_size=500)
    settings = FleetSettings.load()
    if list(settings.topology_levels) != list(fleet.topology):
        settings.topology_levels = list(fleet.topology)
        settings.save(update_fields=["topology_levels"])
    if result.added or result.updated or result.removed:
        reconcile_after_commit()
    return result


def _holding_filter():
    from django.db.models import Q

    from scheduling.models.jobs import HOLDING_STATES

    return Q(placements__job__state__in=HOLDING_STATES)


def fleet_summary_record() -> None:
    """The totals per flavor and rack and the heatmap the fleet page and API show (selectors.fleet_summary),
    computed once by the pass that changed them rather than on every page view."""
    ReconcileState.objects.filter(pk=1).update(fleet_summary=fleet_summary_compute().as_dict())

