"""A small stateful Kubernetes API server over real HTTP for the adapter's tests.

It keeps nodes, pods, Jobs, JobSets and PyTorchJobs in memory with resource versions, serves list and watch (with label
selectors, and a 410 Gone for a watch older than the compacted history), create, merge / JSON patch
with optimistic concurrency (409), delete, a pod-spec validation close to the real one for gated
pods, the JobSet webhook's rule (a replicated job's template changes only while the JobSet is
suspended, and then only its pod labels, annotations, nodeSelector, tolerations and scheduling gates),
a custom resource whose CRD is not installed (404), injected failures, and a request log. It can also
play the controllers: the Job controller (create a Job's pods from its template, delete them when the
Job is suspended), the JobSet controller (child Jobs per replicated job, resumed and suspended with the
JobSet) and the Training Operator (a PyTorchJob's pods per replica).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

KINDS = {
    "nodes": ("v1", "Node", False),
    "pods": ("v1", "Pod", True),
    "jobs": ("batch/v1", "Job", True),
    "jobsets": ("jobset.x-k8s.io/v1alpha2", "JobSet", True),
    "pytorchjobs": ("kubeflow.org/v1", "PyTorchJob", True),
}
CUSTOM = {"jobsets", "pytorchjobs"}

ROUTES = [
    (re.compile(r"^/api/v1/(?P<kind>nodes)(?:/(?P<name>[^/]+))?$"), None),
    (re.compile(r"^/api/v1/(?P<kind>pods)$"), None),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods)(?:/(?P<name>[^/]+))?$"), None),
    (re.compile(r"^/apis/batch/v1/(?P<kind>jobs)$"), None),
    (re.compile(r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>jobs)(?:/(?P<name>[^/]+))?$"), None),
    (re.compile(r"^/apis/jobset.x-k8s.io/v1alpha2/(?P<kind>jobsets)$"), None),
    (re.compile(r"^/apis/jobset.x-k8s.io/v1alpha2/namespaces/(?P<ns>[^/]+)/(?P<kind>jobsets)(?:/(?P<name>[^/]+))?$"), None),
    (re.compile(r"^/apis/kubeflow.org/v1/(?P<kind>pytorchjobs)$"), None),
    (re.compile(r"^/apis/kubeflow.org/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pytorchjobs)(?:/(?P<name>[^/]+))?$"), None),
]


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict:
        return {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }


# --- label selectors and patches ---------------------------------------------------------------------

_TERM = re.compile(r"\s*([^,()]+?\s+(?:in|notin)\s+\([^)]*\)|[^,]+)\s*(?:,|$)")


def matches_selector(labels: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in (m.group(1).strip() for m in _TERM.finditer(selector) if m.group(1).strip()):
        if match := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def merge_patch(target, patch):
    """RFC 7386; strategic merge patch is served the same way (good enough for maps and scalars)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict, operations: list) -> dict:
    result = copy.deepcopy(target)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = result
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"]) if op["op"] == "add" else \
                    parent.__setitem__(int(last), op["value"])
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif op["op"] == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
        else:
            raise ApiError(422, "Invalid", f"unsupported op {op['op']}")
    return result


def validate_pod_update(old: dict, new: dict) -> None:
    """The real API server's rule: a pod's spec is immutable, except that while it is gated its
    nodeSelector may gain keys, and its scheduling gates may only be removed."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_gates = [g["name"] for g in old_spec.get("schedulingGates") or ()]
    new_gates = [g["name"] for g in new_spec.get("schedulingGates") or ()]
    if not set(new_gates) <= set(old_gates):
        raise ApiError(422, "Invalid", "spec.schedulingGates: Forbidden: only deletion is allowed")
    old_selector, new_selector = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
    if old_selector != new_selector:
        if not old_gates:
            raise ApiError(422, "Invalid", "spec: Forbidden: pod updates may not change fields other than ...")
        if any(new_selector.get(k) != v for k, v in old_selector.items()):
            raise ApiError(422, "Invalid", "spec.nodeSelector: Invalid value: only additions are allowed while gated")
    rest_old = {k: v for k, v in old_spec.items() if k not in ("schedulingGates", "nodeSelector")}
    rest_new = {k: v for k, v in new_spec.items() if k not in ("schedulingGates", "nodeSelector")}
    if rest_old != rest_new:
        raise ApiError(422, "Invalid", "spec: Forbidden: pod updates may not change fields other than ...")


_MUTABLE_WHILE_SUSPENDED = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"),
                            ("spec", "tolerations"), ("spec", "schedulingGates"))


def validate_jobset_update(old: dict, new: dict) -> None:
    """The JobSet webhook's rule: replicatedJobs are immutable, except that while the JobSet is (or is being)
    suspended the pod templates' labels, annotations, nodeSelector, tolerations and scheduling gates may change."""

    def munged(jobset: dict) -> list:
        replicated = copy.deepcopy((jobset.get("spec") or {}).get("replicatedJobs") or [])
        if (old.get("spec") or {}).get("suspend") or (new.get("spec") or {}).get("suspend"):
            for rj in replicated:
                pod_template = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
                for section, field in _MUTABLE_WHILE_SUSPENDED:
                    (pod_template.get(section) or {}).pop(field, None)
        return replicated

    if munged(old) != munged(new):
        raise ApiError(422, "Invalid", "spec.replicatedJobs: Invalid value: field is immutable")


# --- the server ------------------------------------------------------------------------------------


@dataclass
class Fault:
    method: str
    path: re.Pattern
    status: int
    remaining: int


class FakeKubernetes:
    """Start with `start()`; `url` is what a client Configuration's host should be."""

    def __init__(self):
        self.objects: dict[str, dict[tuple[str, str], dict]] = {kind: {} for kind in KINDS}
        self.events: list[tuple[int, str, str, dict, dict]] = []
        """(resource version, kind, type, object, labels before the change)."""
        self.resource_version = 100
        self.compacted_rv = 0
        self.requests: list[tuple[str, str, dict, object]] = []
        self.faults: list[Fault] = []
        self.on_request: Callable[[str, str], None] | None = None
        self.uninstalled: set[str] = set()
        """Custom resources whose CRD is not installed: every request for them is a 404."""
        self._cond = threading.Condition()
        self._stopping = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> "FakeKubernetes":
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # --- state, used by the handler and directly by tests ---------------------------------------

    def _bump(self, kind: str, event_type: str, obj: dict, old_labels: dict | None = None) -> None:
        self.resource_version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        labels = obj["metadata"].get("labels") or {}
        self.events.append((self.resource_version, kind, event_type, copy.deepcopy(obj), dict(
            labels if old_labels is None else old_labels)))
        self._cond.notify_all()

    def create(self, kind: str, obj: dict, namespace: str | None = None) -> dict:
        with self._cond:
            obj = copy.deepcopy(obj)
            api_version, kind_name, namespaced = KINDS[kind]
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind_name)
            metadata = obj.setdefault("metadata", {})
            if namespaced:
                metadata["namespace"] = namespace or metadata.get("namespace") or "default"
            if "generateName" in metadata and "name" not in metadata:
                metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
            key = (metadata.get("namespace", ""), metadata["name"])
            if key in self.objects[kind]:
                raise ApiError(409, "AlreadyExists", f'{kind} "{metadata["name"]}" already exists')
            metadata["uid"] = str(uuid.uuid4())
            metadata.setdefault("creationTimestamp", "2025-01-01T00:00:00Z")
            self.objects[kind][key] = obj
            self._bump(kind, "ADDED", obj)
            return copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> dict:
        with self._cond:
            obj = self.objects[kind].get((namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            return copy.deepcopy(obj)

    def modify(self, kind: str, namespace: str, name: str, change: Callable[[dict], None]) -> dict:
        """Change an object in place as another actor would (kubelet, controller, admin)."""
        with self._cond:
            obj = self.objects[kind][(namespace, name)]
            old_labels = dict(obj["metadata"].get("labels") or {})
            change(obj)
            self._bump(kind, "MODIFIED", obj, old_labels)
            return copy.deepcopy(obj)

    def patch(self, kind: str, namespace: str, name: str, body, content_type: str) -> dict:
        with self._cond:
            current = self.objects[kind].get((namespace, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            if "json-patch" in content_type:
                patched = json_patch(current, body)
            else:
                patched = merge_patch(current, body)
            wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409, "Conflict",
                    f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )
            if kind == "pods":
                validate_pod_update(current, patched)
            if kind == "jobsets":
                validate_jobset_update(current, patched)
            patched["metadata"]["uid"] = current["metadata"]["uid"]
            self.objects[kind][(namespace, name)] = patched
            self._bump(kind, "MODIFIED", patched, current["metadata"].get("labels") or {})
            return copy.deepcopy(patched)

    def delete(self, kind: str, namespace: str, name: str) -> dict:
        with self._cond:
            obj = self.objects[kind].pop((namespace, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            self._bump(kind, "DELETED", obj)
            return copy.deepcopy(obj)

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[dict]:
        with self._cond:
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self.objects[kind].items())
                if (namespace is None or ns == namespace)
                and matches_selector((obj.get("metadata") or {}).get("labels") or {}, selector)
            ]

    def compact(self) -> None:
        """Forget the event history up to the next change, as etcd compaction does: every watch that
        has not seen that change gets 410 Gone, the way a watcher that fell behind does. Make the
        next change inside `atomically()` so no watch can start from before it."""
        with self._cond:
            self.compacted_rv = self.resource_version + 1
            self.events.clear()

    def atomically(self) -> threading.Condition:
        """`with fake.atomically():` — changes in the block are seen by watches all at once."""
        return self._cond

    def fail(self, method: str, path: str, status: int, times: int = 1) -> None:
        """The next `times` requests matching method and path regex get `status`."""
        self.faults.append(Fault(method.upper(), re.compile(path), status, times))

    def requests_matching(self, method: str, path: str) -> list[tuple[str, str, dict, object]]:
        return [r for r in self.requests if r[0] == method.upper() and re.search(path, r[1])]

    # --- the Job controller, played by tests ------------------------------------------------------

    def create_job_pod(self, namespace: str, job_name: str, index: int) -> dict:
        """What the Job controller does for one completion index of an unsuspended Indexed Job."""
        job = self.get("jobs", namespace, job_name)
        if job["spec"].get("suspend"):
            raise AssertionError(f"the Job controller creates no pods for suspended job {job_name}")
        template = copy.deepcopy(job["spec"]["template"])
        metadata = template.get("metadata") or {}
        labels = {
            **(metadata.get("labels") or {}),
            "batch.kubernetes.io/job-name": job_name,
            "job-name": job_name,
            "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
            "batch.kubernetes.io/job-completion-index": str(index),
        }
        annotations = {**(metadata.get("annotations") or {}), "batch.kubernetes.io/job-completion-index": str(index)}
        pod = {
            "metadata": {
                "name": f"{job_name}-{index}-{uuid.uuid4().hex[:5]}",
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                    "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        return self.create("pods", pod, namespace)

    def delete_job_pods(self, namespace: str, job_name: str) -> int:
        """What the Job controller does when a Job is suspended."""
        doomed = [p for p in self.list("pods", namespace, f"batch.kubernetes.io/job-name={job_name}")]
        for pod in doomed:
            self.delete("pods", namespace, pod["metadata"]["name"])
        return len(doomed)

    # --- the JobSet controller, played by tests ---------------------------------------------------

    def sync_jobset(self, namespace: str, name: str) -> list[str]:
        """What the JobSet controller does: create the child Jobs it lacks (suspended with the JobSet); when
        the JobSet is resumed, copy each pod template's mutable fields into its child Jobs and resume them;
        when it is suspended, suspend them (their pods go). Returns the child Jobs' names."""
        jobset = self.get("jobsets", namespace, name)
        is_suspended = bool(jobset["spec"].get("suspend"))
        names = []
        for rj in jobset["spec"]["replicatedJobs"]:
            for job_index in range(rj.get("replicas", 1)):
                child = f"{name}-{rj['name']}-{job_index}"
                names.append(child)
                marks = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"]["uid"],
                         "jobset.sigs.k8s.io/replicatedjob-name": rj["name"], "jobset.sigs.k8s.io/job-index": str(job_index)}
                pod_template = copy.deepcopy(rj["template"]["spec"]["template"])
                pod_template.setdefault("metadata", {}).setdefault("labels", {}).update(marks)
                if (namespace, child) not in self.objects["jobs"]:
                    spec = {**copy.deepcopy(rj["template"]["spec"]), "suspend": is_suspended, "template": pod_template}
                    spec.setdefault("completionMode", "Indexed")
                    self.create("jobs", {"metadata": {"name": child, "namespace": namespace, "labels": marks, "ownerReferences": [
                        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name, "uid": jobset["metadata"]["uid"],
                         "controller": True}]}, "spec": spec}, namespace)
                    continue

                def resume_or_suspend(job: dict, pod_template=pod_template) -> None:
                    if not is_suspended and job["spec"].get("suspend"):
                        template = job["spec"]["template"]
                        for section, field in _MUTABLE_WHILE_SUSPENDED:
                            value = (pod_template.get(section) or {}).get(field)
                            if isinstance(value, dict):
                                template.setdefault(section, {}).setdefault(field, {}).update(value)
                            elif value is not None:
                                existing = template.setdefault(section, {}).setdefault(field, [])
                                existing.extend(v for v in value if v not in existing)
                    job["spec"]["suspend"] = is_suspended

                self.modify("jobs", namespace, child, resume_or_suspend)
                if is_suspended:
                    self.delete_job_pods(namespace, child)
        return names

    # --- the Training Operator, played by tests --------------------------------------------------

    def create_pytorch_pod(self, namespace: str, job_name: str, replica_type: str, index: int) -> dict:
        """What the Training Operator does for one replica of an unsuspended PyTorchJob."""
        job = self.get("pytorchjobs", namespace, job_name)
        if job["spec"].get("runPolicy", {}).get("suspend"):
            raise AssertionError(f"the operator creates no pods for suspended pytorchjob {job_name}")
        template = copy.deepcopy(job["spec"]["pytorchReplicaSpecs"][replica_type]["template"])
        metadata = template.get("metadata") or {}
        rtype = replica_type.lower()
        labels = {**(metadata.get("labels") or {}), "training.kubeflow.org/job-name": job_name,
                  "training.kubeflow.org/operator-name": "pytorchjob-controller",
                  "training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)}
        if replica_type == "Master":
            labels["training.kubeflow.org/job-role"] = "master"
        pod = {
            "metadata": {
                "name": f"{job_name}-{rtype}-{index}", "namespace": namespace, "labels": labels,
                "annotations": dict(metadata.get("annotations") or {}),
                "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job_name,
                                     "uid": job["metadata"]["uid"], "controller": True}],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        return self.create("pods", pod, namespace)

    def delete_pytorch_pods(self, namespace: str, job_name: str) -> int:
        """What the operator does when a PyTorchJob is suspended."""
        doomed = self.list("pods", namespace, f"training.kubeflow.org/job-name={job_name}")
        for pod in doomed:
            self.delete("pods", namespace, pod["metadata"]["name"])
        return len(doomed)

    def run_pod(self, namespace: str, name: str, node: str | None = None) -> dict:
        """What the scheduler and kubelet do for an ungated pod: bind it, run it, report it Ready."""

        def change(pod: dict) -> None:
            assert not pod["spec"].get("schedulingGates"), f"pod {name} is still gated"
            pod["spec"]["nodeName"] = node or pod["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname")
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}

        return self.modify("pods", namespace, name, change)


class _Handler(BaseHTTPRequestHandler):
    api: FakeKubernetes
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, each response would wait 40 ms for an ACK.
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self):
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        for pattern, _ in ROUTES:
            if match := pattern.match(parts.path):
                return match.group("kind"), match.groupdict().get("ns"), match.groupdict().get("name"), query, parts.path
        raise ApiError(404, "NotFound", f"the server could not find the requested resource {parts.path}")

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _handle(self, method: str) -> None:
        try:
            kind, namespace, name, query, path = self._route()
            body = self._body() if method in ("POST", "PATCH", "PUT") else None
            self.api.requests.append((method, path, query, body))
            if kind in self.api.uninstalled:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if self.api.on_request is not None:
                self.api.on_request(method, path)
            for fault in self.api.faults:
                if fault.remaining > 0 and fault.method == method and fault.path.search(path):
                    fault.remaining -= 1
                    raise ApiError(fault.status, "Injected", f"injected failure {fault.status}")
            if method == "GET" and name is None and query.get("watch") in ("true", "1"):
                return self._watch(kind, namespace, query)
            self._send(*self._dispatch(method, kind, namespace, name, query, body))
        except ApiError as exc:
            self._send(exc.code, exc.status())

    def _dispatch(self, method, kind, namespace, name, query, body) -> tuple[int, dict]:
        api = self.api
        namespace = namespace or ""
        if method == "GET" and name is None:
            api_version, kind_name, _ = KINDS[kind]
            with api._cond:
                items = api.list(kind, namespace or None, query.get("labelSelector"))
                rv = str(api.resource_version)
            return 200, {"apiVersion": api_version, "kind": f"{kind_name}List", "metadata": {"resourceVersion": rv}, "items": items}
        if method == "GET":
            return 200, api.get(kind, namespace, name)
        if method == "POST" and name is None:
            return 201, api.create(kind, body, namespace or None)
        if method == "PATCH" and name:
            return 200, api.patch(kind, namespace, name, body, self.headers.get("Content-Type", ""))
        if method == "DELETE" and name:
            return 200, api.delete(kind, namespace, name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _watch(self, kind: str, namespace: str | None, query: dict) -> None:
        api = self.api
        selector = query.get("labelSelector")
        timeout_s = float(query.get("timeoutSeconds") or 30)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        # Chunked, like the real API server: the client's reader hands on each chunk as it arrives.
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def write(event: dict) -> bool:
            data = (json.dumps(event) + "\n").encode()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                return True
            except OSError:
                return False

        try:
            self._stream_events(kind, namespace, query, selector, timeout_s, write)
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass

    def _stream_events(self, kind, namespace, query, selector, timeout_s, write) -> None:
        api = self.api

        with api._cond:
            since = query.get("resourceVersion")
            if since and int(since) < api.compacted_rv:
                write({"type": "ERROR", "object": ApiError(
                    410, "Expired", f"too old resource version: {since} ({api.compacted_rv})").status()})
                return
            if not since:
                # A watch without a resource version starts with the current state.
                backlog = [("ADDED", obj) for obj in api.list(kind, namespace, selector)]
                last = api.resource_version
            else:
                backlog, last = [], int(since)
        for event_type, obj in backlog:
            if not write({"type": event_type, "object": obj}):
                return
        deadline = threading.Event()
        timer = threading.Timer(timeout_s, deadline.set)
        timer.daemon = True
        timer.start()
        try:
            while not deadline.is_set():
                with api._cond:
                    if api._stopping:
                        return
                    if last < api.compacted_rv:
                        write({"type": "ERROR", "object": ApiError(410, "Expired", "too old resource version").status()})
                        return
                    fresh = [e for e in api.events if e[0] > last]
                    if not fresh:
                        api._cond.wait(0.05)
                        continue
                for rv, event_kind, event_type, obj, old_labels in fresh:
                    last = rv
                    metadata = obj.get("metadata") or {}
                    if event_kind != kind or (namespace and metadata.get("namespace") != namespace):
                        continue
                    was, now = matches_selector(old_labels, selector), matches_selector(metadata.get("labels") or {}, selector)
                    if not (was or now):
                        continue
                    # As the real watch cache does: leaving the selector is a deletion, entering it an addition.
                    if event_type == "MODIFIED" and was != now:
                        event_type = "ADDED" if now else "DELETED"
                    if not write({"type": event_type, "object": obj}):
                        return
        finally:
            timer.cancel()

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")
