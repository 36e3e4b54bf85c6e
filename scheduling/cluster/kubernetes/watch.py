"""List-then-watch of nodes, pods and Jobs into an in-memory mirror that feeds callbacks (the watcher process)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from typing import Callable, Mapping

from kubernetes import watch as k8s_watch

from scheduling.cluster.base import DiscoveredWorkload
from scheduling.core.model import Node

from . import pods as pod_util
from .api import ClusterError, GoneError
from .cluster import KubernetesCluster
from .names import QUEUE_LABEL

log = logging.getLogger(__name__)

KINDS = ("nodes", "pods", "jobs")
_SELECTORS = {"jobs": QUEUE_LABEL}
"""Only labelled Jobs are mirrored: their uids mark pods as managed, so no other Job may be among them."""

NodesCallback = Callable[[list[Node]], None]
WorkloadsCallback = Callable[[list[DiscoveredWorkload]], None]
EventCallback = Callable[[str, str, Mapping], None]


def _shutdown_stream(watcher: k8s_watch.Watch) -> None:
    """Unblock a thread waiting on a quiet watch. The client's own stop() looks for the socket where
    urllib3 2 no longer keeps it, so a quiet watch would otherwise block until its server timeout."""
    response = getattr(watcher, "_resp", None)
    try:
        sock = response._fp.fp.raw._sock  # http.client response → buffered reader → SocketIO
        sock.shutdown(socket.SHUT_RDWR)
    except (AttributeError, OSError):
        pass


def _owner_job(pod: Mapping) -> tuple[str, str] | None:
    metadata = pod.get("metadata") or {}
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("kind") == "Job":
            return metadata.get("namespace", ""), owner.get("name", "")
    return None


def _key(obj: Mapping) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace", ""), metadata.get("name", "")


class ClusterWatcher:
    """Mirror the cluster by list-then-watch; hand derived nodes and workloads to callbacks when they change.

    `run_once()` lists everything and emits once. `start()` runs one thread per watched stream
    (a kind, per namespace when namespaces are configured) plus one that emits at most every
    `flush_interval_s`, so 10,000 pod events do not mean 10,000 node recomputations. `stop()` ends them.
    """

    def __init__(
        self,
        cluster: KubernetesCluster,
        *,
        on_nodes: NodesCallback | None = None,
        on_workloads: WorkloadsCallback | None = None,
        on_event: EventCallback | None = None,
        pins_gangs: bool = True,
        watch_timeout_s: int | None = None,
        flush_interval_s: float = 0.5,
        error_delay_s: float = 1.0,
    ):
        self.cluster = cluster
        self.on_nodes = on_nodes
        self.on_workloads = on_workloads
        self.on_event = on_event
        self.pins_gangs = pins_gangs
        self.watch_timeout_s = watch_timeout_s or cluster.settings.watch_timeout_s
        self.flush_interval_s = flush_interval_s
        self.error_delay_s = error_delay_s
        self.objects: dict[str, dict[tuple[str, str], Mapping]] = {kind: {} for kind in KINDS}
        self.resource_versions: dict[tuple[str, str | None], str] = {}
        self.relists: Counter[str] = Counter()
        """Lists done per kind, including the first: a 410 Gone shows up as one more."""
        self._lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._dirty: set[str] = set()
        self._last_nodes: list[Node] | None = None
        self._last_workloads: list[DiscoveredWorkload] | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: dict[tuple[str, str | None], k8s_watch.Watch] = {}

    # --- one full pass --------------------------------------------------------------------------

    def run_once(self) -> None:
        """List every stream once, replace the mirror, emit: the `--once` mode and the first step of `start()`."""
        for stream in self._streams():
            self._relist(*stream)
        self.flush()

    def _streams(self) -> list[tuple[str, str | None]]:
        namespaces = self.cluster.settings.namespaces or (None,)
        return [("nodes", None), *((kind, ns) for kind in ("pods", "jobs") for ns in namespaces)]

    def _relist(self, kind: str, namespace: str | None) -> str:
        api = self.cluster.api
        if kind == "nodes":
            items, resource_version = api.list_nodes()
        elif kind == "pods":
            items, resource_version = api.list_pods(namespace=namespace)
        else:
            items, resource_version = api.list_jobs(label_selector=_SELECTORS[kind], namespace=namespace)
        with self._lock:
            mirror = self.objects[kind]
            for key in [k for k in mirror if namespace is None or k[0] == namespace]:
                del mirror[key]
            mirror.update((_key(obj), obj) for obj in items)
            self.resource_versions[(kind, namespace)] = resource_version
            self.relists[kind] += 1
            self._dirty.add(kind)
        if kind == "pods" and self.pins_gangs:
            # Pod events missed while not watching (a restart, a 410) would leave a gang gated forever.
            owners = {}
            for pod in items:
                if pod_util.is_gated(pod):
                    owners.setdefault(_owner_job(pod), pod)
            for owner, pod in owners.items():
                if owner is not None:
                    self._pin_owner(pod)
        return resource_version

    # --- derived views and callbacks ------------------------------------------------------------

    def nodes(self) -> list[Node]:
        with self._lock:
            nodes = list(self.objects["nodes"].values())
            pods = list(self.objects["pods"].values())
            jobs = list(self.objects["jobs"].values())
        return self.cluster.nodes_from(nodes, pods, jobs)

    def workloads(self) -> list[DiscoveredWorkload]:
        with self._lock:
            jobs = list(self.objects["jobs"].values())
        return self.cluster.workloads_from(jobs)

    def flush(self) -> None:
        """Call the callbacks whose derived view changed since they were last called."""
        with self._emit_lock:
            with self._lock:
                dirty, self._dirty = self._dirty, set()
            if dirty and self.on_nodes is not None:
                nodes = self.nodes()
                if nodes != self._last_nodes:
                    self._last_nodes = nodes
                    self.on_nodes(nodes)
            if "jobs" in dirty and self.on_workloads is not None:
                workloads = self.workloads()
                if workloads != self._last_workloads:
                    self._last_workloads = workloads
                    self.on_workloads(workloads)

    # --- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self.run_once()
        for kind, namespace in self._streams():
            thread = threading.Thread(
                target=self._watch_loop, args=(kind, namespace), name=f"watch-{kind}-{namespace or 'all'}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        flusher = threading.Thread(target=self._flush_loop, name="watch-flush", daemon=True)
        flusher.start()
        self._threads.append(flusher)

    def run(self) -> None:
        """Block until `stop()` (or KeyboardInterrupt): the body of `manage.py watch_cluster`."""
        self.start()
        try:
            while not self._stop.wait(1.0):
                pass
        finally:
            self.stop()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        others = [t for t in self._threads if t is not threading.current_thread()]
        # Repeated: a watch request still in flight at the first attempt has no socket to shut yet.
        while any(t.is_alive() for t in others) and time.monotonic() < deadline:
            for watcher in list(self._watches.values()):
                watcher.stop()
                _shutdown_stream(watcher)
            for thread in others:
                thread.join(0.05)
        self._threads = []

    @property
    def is_stopped(self) -> bool:
        return self._stop.is_set()

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # a callback's bug must not end the watcher
                log.exception("watch: a callback failed")

    def _watch_loop(self, kind: str, namespace: str | None) -> None:
        stream = (kind, namespace)
        while not self._stop.is_set():
            try:
                resource_version = self.resource_versions.get(stream) or self._relist(kind, namespace)
                watcher = self._watches[stream] = k8s_watch.Watch()
                for event in self.cluster.api.watch(
                    kind, resource_version, namespace=namespace, label_selector=_SELECTORS.get(kind),
                    timeout_s=self.watch_timeout_s, watcher=watcher,
                ):
                    self._apply(kind, namespace, event)
                    if self._stop.is_set():
                        watcher.stop()
                        break
            except GoneError:
                # Our resource version was compacted away: the events in between are lost, so list again.
                log.info("watch %s: 410 Gone, listing again", kind)
                self.resource_versions.pop(stream, None)
            except ClusterError as exc:
                if self._stop.is_set():
                    break
                log.warning("watch %s: %s; retrying in %.1fs", kind, exc, self.error_delay_s)
                self._stop.wait(self.error_delay_s)
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("watch %s: unexpected error; listing again", kind)
                self.resource_versions.pop(stream, None)
                self._stop.wait(self.error_delay_s)

    def _apply(self, kind: str, namespace: str | None, event: Mapping) -> None:
        event_type, obj = event.get("type"), event.get("object") or {}
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            if event_type in ("ADDED", "MODIFIED"):
                # A Job whose queue label was removed arrives as DELETED through the selector.
                self.objects[kind][_key(obj)] = obj
            elif event_type == "DELETED":
                self.objects[kind].pop(_key(obj), None)
            if resource_version:
                self.resource_versions[(kind, namespace)] = resource_version
            if event_type != "BOOKMARK":
                self._dirty.add(kind)
        if event_type == "BOOKMARK":
            return
        if self.on_event is not None:
            self.on_event(kind, event_type, obj)
        if self.pins_gangs and kind == "pods" and event_type == "ADDED" and pod_util.is_gated(obj):
            self._pin_owner(obj)

    def _pin_owner(self, pod: Mapping) -> None:
        """A new gated pod of a released gang: pin it, and ungate the gang if it was the last one missing."""
        owner = _owner_job(pod)
        if owner is None:
            return
        try:
            self.cluster.pin_gang(*owner)
        except ClusterError as exc:
            # The next pod event, the next relist or the reconcile pass (pin_released_gangs) tries again.
            log.warning("watch: pinning the pods of job %s/%s failed: %s", *owner, exc)
