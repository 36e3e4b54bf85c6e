"""The one translation from pod templates to what Gangway schedules on: GPUs per pod, flavor, tolerations.

Discovery (a Job, a JobSet, a PyTorchJob found in the cluster) and submission through Gangway's API
(a job with a `pod_template`) both read templates here, so a gang is scheduled the same either way.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .pods import pod_spec_gpus

__all__ = ["flavor_of", "gang_tolerations", "pod_spec_gpus", "template_flavor", "template_tolerations"]


def _toleration(raw: Mapping) -> dict[str, str]:
    return {"key": raw.get("key") or "", "operator": raw.get("operator") or "Equal", "value": raw.get("value") or "",
            "effect": raw.get("effect") or ""}


def template_tolerations(spec: Mapping) -> tuple[dict[str, str], ...]:
    """A pod spec's tolerations as {key, operator, value, effect} dicts: GPU nodes are often tainted."""
    return tuple(_toleration(t) for t in spec.get("tolerations") or () if isinstance(t, Mapping))


def gang_tolerations(specs: Iterable[Mapping]) -> tuple[dict[str, str], ...]:
    """The tolerations every pod template of the gang holds: a node is fit for the gang only if every
    pod pinned to it tolerates its taints (a launcher without the GPU toleration cannot go to a GPU node)."""
    specs = list(specs)
    if not specs:
        return ()
    first, *others = [template_tolerations(spec) for spec in specs]
    return tuple(t for t in first if all(t in other for other in others))


def template_flavor(spec: Mapping, flavor_label: str) -> str:
    return str((spec.get("nodeSelector") or {}).get(flavor_label) or "")


def flavor_of(specs: Iterable[Mapping], flavor_label: str) -> str:
    """The flavor the templates select on the flavor label (the first that names one), or ""."""
    return next((flavor for spec in specs if (flavor := template_flavor(spec, flavor_label))), "")
