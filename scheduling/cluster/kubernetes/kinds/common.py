"""What every kind reads the same way: its Gangway labels and annotations, its pod templates, its release stamps."""

from __future__ import annotations

import copy
import json
import logging
from datetime import datetime
from typing import Mapping, Sequence

from scheduling.cluster.base import DiscoveredWorkload, WorkloadPhase, WorkloadSpec
from scheduling.core.model import PodSet

from ..config import KubernetesSettings
from ..names import (
    ADMISSION_GATE, CHECKPOINT_INTERVAL_ANNOTATION, FLAVOR_ANNOTATION, GENERATION_ANNOTATION, MANAGED_LABEL,
    PLACEMENT_ANNOTATION, PREEMPTIBLE_ANNOTATION, PRIORITY_ANNOTATION, PRIORITY_CLASS_LABELS, QUEUE_LABELS,
    RUNTIME_LIMIT_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION,
)
from ..templates import flavor_of, gang_tolerations, pod_spec_gpus

log = logging.getLogger(__name__)


def meta(obj: Mapping) -> Mapping:
    return obj.get("metadata") or {}


def annotations(obj: Mapping) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def labels(obj: Mapping) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def key(obj: Mapping) -> tuple[str, str]:
    return meta(obj).get("namespace", ""), meta(obj)["name"]


def uid(obj: Mapping | None) -> str | None:
    return meta(obj or {}).get("uid")


def queue_of(obj: Mapping) -> str | None:
    """The queue named by Gangway's label, else by Kueue's."""
    return next((labels(obj)[name] for name in QUEUE_LABELS if labels(obj).get(name)), None)


def priority_class_of(obj: Mapping) -> str | None:
    return next((labels(obj)[name] for name in PRIORITY_CLASS_LABELS if labels(obj).get(name)), None)


def generation_of(obj: Mapping) -> int:
    try:
        return int(annotations(obj).get(GENERATION_ANNOTATION) or 0)
    except ValueError:
        return 0


def owner_named(pod: Mapping, *, kind: str) -> str | None:
    """The name of the pod's owner of `kind` (its controller's object), None when it has none."""
    for owner in meta(pod).get("ownerReferences") or ():
        if owner.get("kind") == kind:
            return owner.get("name")
    return None


def has_condition(obj: Mapping, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def finished_phase(obj: Mapping, *, succeeded: str) -> WorkloadPhase | None:
    """SUCCEEDED when the kind's success condition (`succeeded`: "Complete", "Completed", …) is true, FAILED on
    "Failed", None while it runs."""
    if has_condition(obj, succeeded):
        return WorkloadPhase.SUCCEEDED
    if has_condition(obj, "Failed"):
        return WorkloadPhase.FAILED
    return None


def int_annotation(obj: Mapping, name: str) -> int | None:
    raw = annotations(obj).get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        log.warning("%s/%s: ignoring %s=%r (not an integer)", *key(obj), name, raw)
        return None


def bool_annotation(obj: Mapping, name: str, default: bool) -> bool:
    raw = annotations(obj).get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    log.warning("%s/%s: ignoring %s=%r (not a boolean)", *key(obj), name, raw)
    return default


def timestamp(value) -> float | None:
    """An RFC 3339 time from the API ("2026-12-03T08:00:00Z") as epoch seconds; None if absent or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --- discovery: labels, annotations and pod templates → the gang description -----------------------


def workload_of(
    obj: Mapping, *, kind: str, roles: Sequence[tuple[str, int, Mapping]], settings: KubernetesSettings
) -> DiscoveredWorkload | None:
    """The gang a labelled, suspended workload describes; `roles` are (pod set, pods, pod template spec)."""
    queue = queue_of(obj)
    if not queue:
        return None
    specs = [spec for _, _, spec in roles]
    namespace, name = key(obj)
    return DiscoveredWorkload(
        namespace=namespace,
        name=name,
        kind=kind,
        spec=WorkloadSpec(
            queue=queue,
            flavor=annotations(obj).get(FLAVOR_ANNOTATION) or flavor_of(specs, settings.flavor_label),
            pod_sets=tuple(PodSet(name=role, count=count, gpus_per_pod=pod_spec_gpus(spec)) for role, count, spec in roles),
            priority=int_annotation(obj, PRIORITY_ANNOTATION) or 0,
            priority_class=priority_class_of(obj),
            topology_required=annotations(obj).get(TOPOLOGY_REQUIRED_ANNOTATION) or None,
            topology_preferred=annotations(obj).get(TOPOLOGY_PREFERRED_ANNOTATION) or None,
            runtime_limit_s=int_annotation(obj, RUNTIME_LIMIT_ANNOTATION),
            checkpoint_interval_s=int_annotation(obj, CHECKPOINT_INTERVAL_ANNOTATION),
            is_preemptible=bool_annotation(obj, PREEMPTIBLE_ANNOTATION, True),
        ),
        annotations={k: v for k, v in annotations(obj).items() if k.startswith("gangway.dev/")},
        tolerations=gang_tolerations(specs),
        created_at=timestamp(meta(obj).get("creationTimestamp")),
    )


# --- release: what Gangway writes on the workload and on every pod template ------------------------


def stamped_template(template: Mapping, generation: int) -> dict:
    """`template` with this admission's generation and the managed label on its pods, and Gangway's gate."""
    template = copy.deepcopy(dict(template))
    metadata = template.setdefault("metadata", {})
    metadata.setdefault("annotations", {})[GENERATION_ANNOTATION] = str(generation)
    metadata.setdefault("labels", {})[MANAGED_LABEL] = "true"
    spec = template.setdefault("spec", {})
    gates = list(spec.get("schedulingGates") or ())
    if not any(gate.get("name") == ADMISSION_GATE for gate in gates):
        # A user's workload without our gate would start its pods wherever the scheduler likes.
        spec["schedulingGates"] = [*gates, {"name": ADMISSION_GATE}]
    return template


def template_stamp_patch(template: Mapping, generation: int) -> dict:
    """The merge patch of a pod template that `stamped_template` describes (maps merge, lists are replaced)."""
    stamped = stamped_template(template, generation)
    patch: dict = {"metadata": {"annotations": {GENERATION_ANNOTATION: str(generation)}, "labels": {MANAGED_LABEL: "true"}}}
    if stamped["spec"].get("schedulingGates") != ((template.get("spec") or {}).get("schedulingGates")):
        patch["spec"] = {"schedulingGates": stamped["spec"]["schedulingGates"]}
    return patch


def placement_annotation(placement: Mapping[tuple[str, int], str]) -> str:
    """{pod set: {index: node}}, sorted, as written on the workload at release."""
    nested: dict[str, dict[str, str]] = {}
    for (pod_set, index), node in sorted(placement.items()):
        nested.setdefault(pod_set, {})[str(index)] = node
    return json.dumps(nested)


def placement_of(obj: Mapping, *, single_pod_set: str | None = None) -> dict[tuple[str, int], str]:
    """(pod set, index) → node, as written at release. A flat {index: node} (written by Gangway before
    gangs had several pod sets) is read as the placement of `single_pod_set`."""
    raw = annotations(obj).get(PLACEMENT_ANNOTATION)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
        if single_pod_set is not None and all(isinstance(node, str) for node in parsed.values()):
            return {(single_pod_set, int(index)): node for index, node in parsed.items()}
        return {(pod_set, int(index)): node for pod_set, nodes in parsed.items() for index, node in nodes.items()}
    except (ValueError, AttributeError):
        log.warning("%s/%s: unreadable %s annotation %r", *key(obj), PLACEMENT_ANNOTATION, raw)
        return {}
