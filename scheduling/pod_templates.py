"""The policy on pod templates submitted through Gangway: only what a training job needs, nothing that escalates.

Gangway's ServiceAccount creates the Job from the template, so anything the template may set, a researcher may
set with Gangway's rights. The policy is an allowlist: containers with their image, command, arguments,
environment, resources, ports and volume mounts; a nodeSelector (the flavor label, not a node); volumes of kinds that reach no further than the pod (emptyDir,
a PersistentVolumeClaim, a ConfigMap); tolerations; labels and annotations outside `gangway.dev/`; and a
security context that may only restrict. Everything else — privileged, added capabilities, host namespaces,
hostPath, hostPort, serviceAccountName, nodeName, priorityClassName, … — is refused, naming the field.
Workloads discovered in the cluster are not checked: their owners created them with their own rights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

RESERVED_PREFIX = "gangway.dev/"
VOLUME_KINDS = ("emptyDir", "persistentVolumeClaim", "configMap")
HOSTNAME_LABEL = "kubernetes.io/hostname"
NOT_ALLOWED = "not allowed in a pod template submitted through Gangway"

Violation = tuple[str, str]
"""(dotted field path, reason)."""


def pod_template_violations(template, *, field: str = "pod_template") -> list[Violation]:
    """Every field of `template` the policy refuses, with the reason; empty when the template is acceptable."""
    violations = list(_object(template, field, TEMPLATE, required=("spec",)))
    if not violations:
        violations.extend(_undeclared_mounts(template["spec"], f"{field}.spec"))
    return violations


def _undeclared_mounts(spec: dict, field: str) -> Iterator[Violation]:
    declared = {volume["name"] for volume in spec.get("volumes", ())}
    for i, container in enumerate(spec["containers"]):
        for j, mount in enumerate(container.get("volumeMounts", ())):
            if mount["name"] not in declared:
                yield f"{field}.containers.{i}.volumeMounts.{j}.name", f"no volume named {mount['name']!r} in spec.volumes"


# --- the shape checks ---------------------------------------------------------------------------------------
Check = Callable[[object, str], Iterator[Violation]]


def _object(value, field: str, allowed: dict[str, Check], *, required: tuple[str, ...] = ()) -> Iterator[Violation]:
    if not isinstance(value, dict):
        yield field, "must be an object"
        return
    for key in required:
        if key not in value:
            yield f"{field}.{key}", "required"
    for key, item in value.items():
        check = allowed.get(key)
        if check is None:
            yield f"{field}.{key}", NOT_ALLOWED
        else:
            yield from check(item, f"{field}.{key}")


def _list_of(check: Check, *, non_empty: bool = False) -> Check:
    def checked(value, field: str) -> Iterator[Violation]:
        if not isinstance(value, list) or (non_empty and not value):
            yield field, "must be a non-empty list" if non_empty else "must be a list"
            return
        for i, item in enumerate(value):
            yield from check(item, f"{field}.{i}")

    return checked


def _fields(allowed: dict[str, Check], *, required: tuple[str, ...] = ()) -> Check:
    return lambda value, field: _object(value, field, allowed, required=required)


def _string(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, str) or not value:
        yield field, "must be a non-empty string"


def _strings(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        yield field, "must be a list of strings"


def _text(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, str):
        yield field, "must be a string"


def _boolean(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, bool):
        yield field, "must be true or false"


def _integer(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        yield field, "must be an integer between 0 and 2147483647"


def _one_of(*choices) -> Check:
    def checked(value, field: str) -> Iterator[Violation]:
        if value not in choices:
            yield field, f"must be one of {list(choices)}"

    return checked


def _user_id(value, field: str) -> Iterator[Violation]:
    yield from _integer(value, field)
    if value == 0:
        yield field, "must not be 0 (root)"


def _metadata_map(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        yield field, "must be an object of strings"
        return
    for key in value:
        if key.startswith(RESERVED_PREFIX):
            yield f"{field}.{key}", f"keys under {RESERVED_PREFIX} are Gangway's own"


def _node_selector(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        yield field, "must be an object of strings"
        return
    if HOSTNAME_LABEL in value:
        yield f"{field}.{HOSTNAME_LABEL}", "Gangway chooses the nodes of a gang; select a flavor or a topology instead"


def _quantities(value, field: str) -> Iterator[Violation]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool) for k, v in value.items()
    ):
        yield field, "must be an object of resource name → quantity"


def _volume(value, field: str) -> Iterator[Violation]:
    violations = list(_object(value, field, {"name": _string, **{kind: _volume_source(kind) for kind in VOLUME_KINDS}}, required=("name",)))
    yield from violations
    if not violations and sum(kind in value for kind in VOLUME_KINDS) != 1:
        yield field, f"must have exactly one of {list(VOLUME_KINDS)}"


def _volume_source(kind: str) -> Check:
    allowed: dict[str, dict[str, Check]] = {
        "emptyDir": {"medium": _one_of("", "Memory"), "sizeLimit": _string},
        "persistentVolumeClaim": {"claimName": _string, "readOnly": _boolean},
        "configMap": {"name": _string, "optional": _boolean, "defaultMode": _integer,
                      "items": _list_of(_fields({"key": _string, "path": _string, "mode": _integer}, required=("key", "path")))},
    }
    return _fields(allowed[kind], required=("claimName",) if kind == "persistentVolumeClaim" else ())


def _capabilities(value, field: str) -> Iterator[Violation]:
    yield from _object(value, field, {"drop": _strings})


# A security context may only restrict: no privilege, no escalation, no added capabilities, never root.
CONTAINER_SECURITY = {
    "runAsNonRoot": _one_of(True),
    "runAsUser": _user_id,
    "runAsGroup": _user_id,
    "allowPrivilegeEscalation": _one_of(False),
    "readOnlyRootFilesystem": _boolean,
    "capabilities": _capabilities,
    "seccompProfile": _fields({"type": _one_of("RuntimeDefault")}, required=("type",)),
}
POD_SECURITY = {
    "runAsNonRoot": _one_of(True),
    "runAsUser": _user_id,
    "runAsGroup": _user_id,
    "fsGroup": _integer,
    "seccompProfile": _fields({"type": _one_of("RuntimeDefault")}, required=("type",)),
}
ENV_VALUE_FROM = {
    "fieldRef": _fields({"fieldPath": _string, "apiVersion": _string}, required=("fieldPath",)),
    "resourceFieldRef": _fields({"resource": _string, "containerName": _string, "divisor": _string}, required=("resource",)),
}
CONTAINER = {
    "name": _string,
    "image": _string,
    "imagePullPolicy": _one_of("Always", "IfNotPresent", "Never"),
    "command": _strings,
    "args": _strings,
    "workingDir": _string,
    "env": _list_of(_fields({"name": _string, "value": _text, "valueFrom": _fields(ENV_VALUE_FROM)}, required=("name",))),
    "resources": _fields({"limits": _quantities, "requests": _quantities}),
    "ports": _list_of(_fields({"containerPort": _integer, "name": _string, "protocol": _one_of("TCP", "UDP", "SCTP")},
                              required=("containerPort",))),
    "volumeMounts": _list_of(_fields({"name": _string, "mountPath": _string, "readOnly": _boolean, "subPath": _string},
                                     required=("name", "mountPath"))),
    "securityContext": _fields(CONTAINER_SECURITY),
}
TOLERATION = {
    "key": _string,
    "operator": _one_of("Exists", "Equal"),
    "value": _text,
    "effect": _one_of("", "NoSchedule", "PreferNoSchedule", "NoExecute"),
    "tolerationSeconds": _integer,
}
SPEC = {
    "containers": _list_of(_fields(CONTAINER, required=("name", "image")), non_empty=True),
    "volumes": _list_of(_volume),
    "tolerations": _list_of(_fields(TOLERATION)),
    "nodeSelector": _node_selector,
    "restartPolicy": _one_of("Never", "OnFailure"),
    "securityContext": _fields(POD_SECURITY),
}
TEMPLATE = {
    "metadata": _fields({"labels": _metadata_map, "annotations": _metadata_map}),
    "spec": _fields(SPEC, required=("containers",)),
}
