"""List-then-watch of nodes, pods and queue-labelled workloads of every kind into an in-memory mirror that
feeds callbacks (the watcher process)."""

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

from . import gangs, kinds
from . import pods as pod_util
from .api import ClusterError, GoneError
from .cluster import KubernetesCluster
from .kinds import WorkloadKind
from .names import QUEUE_LABELS

log = logging.getLogger(__name__)

WORKLOAD_MIRRORS: dict[str, tuple[WorkloadKind, str]] = {
    f"{kind.KIND} {label}": (kind, label) for kind in kinds.ALL for label in QUEUE_LABELS
}
"""One mirror per kind and queue label (a selector cannot say "this label or that one"). Only labelled
workloads are mirrored: their uids mark pods as managed, so no other workload may be among them."""
MIRRORS = ("nodes", "pods", *WORKLOAD_MIRRORS)
ABSENT_RETRY_S = 300.0
"""How often a kind whose CRD is not installed is listed again, quietly, in case it was installed since."""

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


def _key(obj: Mapping) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace", ""), metadata.get("name", "")


class ClusterWatcher:
    """Mirror the cluster by list-then-watch; hand derived nodes and workloads to callbacks when they change.

    `run_once()` lists everything and emits once. `start()` runs one thread per watched stream
    (nodes, pods, each workload kind and queue label; per namespace when namespaces are configured) plus one that emits at most every
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
        self.objects: dict[str, dict[tuple[str, str], Mapping]] = {mirror: {} for mirror in MIRRORS}
        self.resource_versions: dict[tuple[str, str | None], str] = {}
        self.relists: Counter[str] = Counter()
        """Lists done per mirror, including the first: a 410 Gone shows up as one more."""
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
        return [("nodes", None), *((mirror, ns) for mirror in MIRRORS[1:] for ns in namespaces)]

    def _relist(self, mirror: str, namespace: str | None) -> str | None:
        """List one stream into its mirror; None when its workload kind is not served (CRD not installed)."""
        api = self.cluster.api
        if mirror == "nodes":
            items, resource_version = api.list_nodes()
        elif mirror == "pods":
            items, resource_version = api.list_pods(namespace=namespace)
        else:
            kind, label = WORKLOAD_MIRRORS[mirror]
            try:
                items, resource_version = api.list_objects(gangs.resource_of(kind), label_selector=label, namespace=namespace)
            except ClusterError as exc:
                if self.cluster.absent_kinds.note(kind, exc):
                    return None
                raise
            self.cluster.absent_kinds.served(kind)
        with self._lock:
            objects = self.objects[mirror]
            for key in [k for k in objects if namespace is None or k[0] == namespace]:
                del objects[key]
            objects.update((_key(obj), obj) for obj in items)
            self.resource_versions[(mirror, namespace)] = resource_version
            self.relists[mirror] += 1
            self._dirty.add(mirror)
        if mirror == "pods" and self.pins_gangs:
            # Pod events missed while not watching (a restart, a 410) would leave a gang gated forever.
            gangs_waiting = {}
            for pod in items:
                if pod_util.is_gated(pod) and (gang := gangs.gang_of_pod(pod)) is not None:
                    gangs_waiting.setdefault((gang[0].KIND, *gang[1:]), pod)
            for pod in gangs_waiting.values():
                self._pin_owner(pod)
        return resource_version

    # --- derived views and callbacks ------------------------------------------------------------

    def labelled_workloads(self) -> dict[str, list[Mapping]]:
        """The mirrored workloads by kind, each once (one may carry both queue labels)."""
        with self._lock:
            by_kind: dict[str, dict[tuple[str, str], Mapping]] = {kind.KIND: {} for kind in kinds.ALL}
            for mirror, (kind, _) in WORKLOAD_MIRRORS.items():
                for key, obj in self.objects[mirror].items():
                    by_kind[kind.KIND].setdefault(key, obj)
        return {kind: [objs[k] for k in sorted(objs)] for kind, objs in by_kind.items()}

    def nodes(self) -> list[Node]:
        with self._lock:
            nodes = list(self.objects["nodes"].values())
            pods = list(self.objects["pods"].values())
        return self.cluster.nodes_from(nodes, pods, self.labelled_workloads())

    def workloads(self) -> list[DiscoveredWorkload]:
        return self.cluster.workloads_from(self.labelled_workloads())

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
            if dirty & set(WORKLOAD_MIRRORS) and self.on_workloads is not None:
                workloads = self.workloads()
                if workloads != self._last_workloads:
                    self._last_workloads = workloads
                    self.on_workloads(workloads)

    # --- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self.run_once()
        for mirror, namespace in self._streams():
            thread = threading.Thread(
                target=self._watch_loop, args=(mirror, namespace), name=f"watch-{mirror}-{namespace or 'all'}", daemon=True
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

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # a callback's bug must not end the watcher
                log.exception("watch: a callback failed")

    def _watch_loop(self, mirror: str, namespace: str | None) -> None:
        stream = (mirror, namespace)
        kind, label = WORKLOAD_MIRRORS.get(mirror, (None, None))
        while not self._stop.is_set():
            try:
                resource_version = self.resource_versions.get(stream) or self._relist(mirror, namespace)
                if resource_version is None:
                    # Not served: the one log line was written by the list; look again much later, quietly.
                    self._stop.wait(ABSENT_RETRY_S)
                    continue
                watcher = self._watches[stream] = k8s_watch.Watch()
                for event in self.cluster.api.watch(
                    gangs.resource_of(kind) if kind else mirror, resource_version, namespace=namespace,
                    label_selector=label, timeout_s=self.watch_timeout_s, watcher=watcher,
                ):
                    self._apply(mirror, namespace, event)
                    if self._stop.is_set():
                        watcher.stop()
                        break
            except GoneError:
                # Our resource version was compacted away: the events in between are lost, so list again.
                log.info("watch %s: 410 Gone, listing again", mirror)
                self.resource_versions.pop(stream, None)
            except ClusterError as exc:
                if self._stop.is_set():
                    break
                log.warning("watch %s: %s; retrying in %.1fs", mirror, exc, self.error_delay_s)
                self._stop.wait(self.error_delay_s)
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("watch %s: unexpected error; listing again", mirror)
                self.resource_versions.pop(stream, None)
                self._stop.wait(self.error_delay_s)

    def _apply(self, mirror: str, namespace: str | None, event: Mapping) -> None:
        event_type, obj = event.get("type"), event.get("object") or {}
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            if event_type in ("ADDED", "MODIFIED"):
                # A workload whose queue label was removed arrives as DELETED through the selector.
                self.objects[mirror][_key(obj)] = obj
            elif event_type == "DELETED":
                self.objects[mirror].pop(_key(obj), None)
            if resource_version:
                self.resource_versions[(mirror, namespace)] = resource_version
            if event_type != "BOOKMARK":
                self._dirty.add(mirror)
        if event_type == "BOOKMARK":
            return
        if self.on_event is not None:
            self.on_event(mirror, event_type, obj)
        if self.pins_gangs and mirror == "pods" and event_type == "ADDED" and pod_util.is_gated(obj):
            self._pin_owner(obj)

    def _pin_owner(self, pod: Mapping) -> None:
        """A new gated pod of a released gang: pin it, and ungate the gang if it was the last one missing."""
        try:
            self.cluster.pin_gang_of(pod)
        except ClusterError as exc:
            # The next pod event, the next relist or the reconcile pass (pin_released_gangs) tries again.
            log.warning("watch: pinning the gang of pod %s/%s failed: %s", *_key(pod), exc)
