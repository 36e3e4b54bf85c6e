"""Queue writes: create queues and change their settings and per-flavor quotas (team lead or admin)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Sum

from scheduling.core.model import PreemptionPolicy, QueueingStrategy
from scheduling.models import AuditAction, Cohort, Flavor, Node, Queue, QueueQuota, QueueUsage, Team, TeamAllotment
from scheduling.permissions import can_edit_team_queues, is_admin
from scheduling.services.audit import audit_record, changes
from scheduling.services.common import (MAX_QUEUE_WEIGHT, Errors, create_named, is_count, reconcile_after_commit, validate_name,
                                        validate_new_name)

UNSET = object()
QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")
QUOTA_KEYS = set(QUOTA_FIELDS)


def _clean_quotas(errors: Errors, quotas) -> dict[Flavor, dict]:
    if not isinstance(quotas, dict):
        errors.add("quotas", "must be an object mapping flavor name to {nominal, borrowing_limit, lending_limit}")
        return {}
    flavors = {f.name: f for f in Flavor.objects.filter(name__in=[k for k in quotas if isinstance(k, str)])}
    fleet_gpus = _fleet_gpus(list(flavors.values()))
    clean = {}
    for flavor_name, quota in quotas.items():
        field = f"quotas.{flavor_name}"
        if flavor_name not in flavors:
            errors.add(field, f"unknown flavor {flavor_name!r}")
            continue
        if not isinstance(quota, dict):
            errors.add(field, "must be an object with nominal, borrowing_limit and lending_limit")
            continue
        unknown = set(quota) - QUOTA_KEYS
        if unknown:
            errors.add(field, f"unknown keys {sorted(unknown)}")
        nominal = quota.get("nominal")
        is_valid = True
        if not is_count(nominal) or nominal < 0:
            errors.add(f"{field}.nominal", "required, an integer ≥ 0")
            is_valid = False
        for key in ("borrowing_limit", "lending_limit"):
            value = quota.get(key)
            if value is not None and (not is_count(value) or value < 0):
                errors.add(f"{field}.{key}", "must be null or an integer ≥ 0")
                is_valid = False
        lending = quota.get("lending_limit")
        if is_valid and lending is not None and lending > nominal:
            errors.add(f"{field}.lending_limit", f"{lending} exceeds the nominal quota {nominal}")
            is_valid = False
        borrowing, in_fleet = quota.get("borrowing_limit"), fleet_gpus.get(flavor_name)
        if is_valid and borrowing is not None and in_fleet and borrowing > in_fleet:
            errors.add(f"{field}.borrowing_limit", f"{borrowing:,} is more than the {in_fleet:,} {flavor_name} GPUs in the whole fleet; "
                                                   "leave it empty to borrow whatever the cohort lends")
            is_valid = False
        if is_valid and not unknown:
            clean[flavors[flavor_name]] = {
                "nominal": nominal,
                "borrowing_limit": quota.get("borrowing_limit"),
                "lending_limit": lending,
            }
    return clean


def _fleet_gpus(flavors: list[Flavor]) -> dict[str, int]:
    """GPUs of each flavor in the fleet (a flavor without nodes yet is absent: its limits wait for its nodes)."""
    rows = Node.objects.filter(flavor__in=flavors).values("flavor__name").annotate(gpus=Sum("capacity_gpus")).order_by()
    return {row["flavor__name"]: row["gpus"] for row in rows}


def _check_allotments(errors: Errors, *, team: Team, queue: Queue | None, quotas: dict[Flavor, dict]) -> None:
    """The sum of a team's queue nominals per flavor may not exceed the team's allotment."""
    if not quotas:
        return
    others = QueueQuota.objects.filter(queue__team=team, flavor__in=list(quotas))
    if queue is not None:
        others = others.exclude(queue=queue)
    other_nominal = dict(others.values("flavor_id").annotate(total=Sum("nominal")).values_list("flavor_id", "total"))
    allotted = dict(TeamAllotment.objects.filter(team=team, flavor__in=list(quotas)).values_list("flavor_id", "gpus"))
    for flavor, quota in quotas.items():
        total = other_nominal.get(flavor.pk, 0) + quota["nominal"]
        allotment = allotted.get(flavor.pk, 0)
        if total > allotment:
            errors.add(
                f"quotas.{flavor.name}.nominal",
                f"team {team.name} would hold {total} {flavor.name} GPUs of nominal quota over its queues; its allotment is {allotment}",
            )


def _clean_settings(errors: Errors, *, weight, strategy, preemption_policy, cohort_name) -> None:
    if weight is not UNSET and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= MAX_QUEUE_WEIGHT):
        errors.add("weight", f"must be a number > 0 and at most {MAX_QUEUE_WEIGHT:g}")
    if strategy is not UNSET and strategy not in {s.value for s in QueueingStrategy}:
        errors.add("strategy", f"must be one of {[s.value for s in QueueingStrategy]}")
    if preemption_policy is not UNSET and preemption_policy not in {p.value for p in PreemptionPolicy}:
        errors.add("preemption_policy", f"must be one of {[p.value for p in PreemptionPolicy]}")
    if cohort_name not in (UNSET, None, ""):
        validate_name(errors, "cohort", cohort_name)


def _check_cohort_change(actor, *, current: str | None, cohort_name: str | None) -> None:
    """Cohort membership decides who lends to whom across teams: admins set it, leads keep what they have."""
    if cohort_name != current and not is_admin(actor):
        raise PermissionDenied("only admins put a queue into a cohort or take it out")


def _save_quotas(queue: Queue, quotas: dict[Flavor, dict]) -> None:
    for flavor, quota in quotas.items():
        QueueQuota.objects.update_or_create(queue=queue, flavor=flavor, defaults=quota)


@transaction.atomic
def queue_create(
    *,
    actor,
    name: str,
    team_name: str,
    cohort_name: str | None = None,
    weight: float = 1.0,
    strategy: str = QueueingStrategy.BEST_EFFORT_FIFO.value,
    preemption_policy: str = PreemptionPolicy.WITHIN_QUEUE_AND_RECLAIM.value,
    quotas: dict | None = None,
    validate_only: bool = False,
) -> Queue | None:
    """A new queue of `team_name` (its lead or an admin; cohorts: admins). `validate_only`: check, write nothing."""
    errors = Errors()
    validate_new_name(errors, Queue, name)
    team = Team.objects.filter(name=team_name).first() if isinstance(team_name, str) else None
    if team is None:
        errors.add("team", f"unknown team {team_name!r}")
    elif not can_edit_team_queues(actor, team.pk):
        raise PermissionDenied(f"only a lead of {team.name} or an admin creates its queues")
    _check_cohort_change(actor, current=None, cohort_name=cohort_name or None)
    _clean_settings(errors, weight=weight, strategy=strategy, preemption_policy=preemption_policy, cohort_name=cohort_name)
    clean = _clean_quotas(errors, quotas if quotas is not None else {})
    if team is not None:
        _check_allotments(errors, team=team, queue=None, quotas=clean)
    errors.raise_if_any()
    if validate_only:
        return None
    cohort = Cohort.objects.get_or_create(name=cohort_name)[0] if cohort_name else None
    queue = create_named(
        Queue, name=name, team=team, cohort=cohort, weight=float(weight), strategy=strategy, preemption_policy=preemption_policy
    )
    QueueUsage.objects.create(queue=queue)
    _save_quotas(queue, clean)
    audit_record(actor=actor, action=AuditAction.QUEUE_CREATE, target=queue, team=team, after={**_settings(queue), **_quotas(queue)})
    reconcile_after_commit()
    return queue


def queue_change_check(
    *, actor, queue_name: str, action: str, lock: bool, cohort_name, weight, strategy, preemption_policy, quotas: dict | None
) -> tuple[Queue, dict]:
    """The queue and its cleaned quotas, once `actor` may make this change and it is valid (queue_update's rules,
    shared with its preview); raises Queue.DoesNotExist, PermissionDenied or ValidationError otherwise."""
    rows = Queue.objects.select_related("team")
    queue = (rows.select_for_update() if lock else rows).filter(name=queue_name).first()
    if queue is None:
        raise Queue.DoesNotExist(queue_name)
    if not can_edit_team_queues(actor, queue.team_id):
        raise PermissionDenied(f"only a lead of {queue.team.name} or an admin {action}")
    if cohort_name is not UNSET:
        _check_cohort_change(actor, current=queue.cohort.name if queue.cohort_id else None, cohort_name=cohort_name or None)
    errors = Errors()
    _clean_settings(errors, weight=weight, strategy=strategy, preemption_policy=preemption_policy, cohort_name=cohort_name)
    clean = _clean_quotas(errors, quotas) if quotas is not None else {}
    _check_allotments(errors, team=queue.team, queue=queue, quotas=clean)
    errors.raise_if_any()
    return queue, clean


@transaction.atomic
def queue_update(
    *,
    actor,
    queue_name: str,
    cohort_name=UNSET,
    weight=UNSET,
    strategy=UNSET,
    preemption_policy=UNSET,
    quotas: dict | None = None,
    validate_only: bool = False,
) -> Queue | None:
    """Change the given settings; `quotas` sets the given flavors' quotas (others keep theirs). `validate_only`:
    check, write nothing."""
    queue, clean = queue_change_check(
        actor=actor, queue_name=queue_name, action="edits its queues", lock=not validate_only, cohort_name=cohort_name,
        weight=weight, strategy=strategy, preemption_policy=preemption_policy, quotas=quotas,
    )
    if validate_only:
        return None
    settings_before, quotas_before = _settings(queue), _quotas(queue)
    if cohort_name is not UNSET:
        queue.cohort = Cohort.objects.get_or_create(name=cohort_name)[0] if cohort_name else None
    if weight is not UNSET:
        queue.weight = float(weight)
    if strategy is not UNSET:
        queue.strategy = strategy
    if preemption_policy is not UNSET:
        queue.preemption_policy = preemption_policy
    queue.save()
    _save_quotas(queue, clean)
    for action, old, new in ((AuditAction.QUEUE_SETTINGS_UPDATE, *changes(settings_before, _settings(queue))),
                             (AuditAction.QUOTA_UPDATE, *changes(quotas_before, _quotas(queue)))):
        if new:
            audit_record(actor=actor, action=action, target=queue, team=queue.team, before=old, after=new)
    reconcile_after_commit()
    return queue


def _settings(queue: Queue) -> dict:
    """A queue's settings as the audit log records them."""
    return {"cohort": queue.cohort.name if queue.cohort else None, "weight": queue.weight, "strategy": queue.strategy,
            "preemption_policy": queue.preemption_policy}


def _quotas(queue: Queue) -> dict:
    """A queue's quotas as the audit log records them: {"quotas.<flavor>": {nominal, borrowing_limit, lending_limit}}."""
    return {f"quotas.{row['flavor__name']}": {k: row[k] for k in QUOTA_FIELDS}
            for row in QueueQuota.objects.filter(queue=queue).values("flavor__name", *QUOTA_FIELDS)}
