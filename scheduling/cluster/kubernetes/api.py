"""The retrying façade over the official client: raw JSON objects in and out, backoff, clear errors."""

from __future__ import annotations

import json
import logging
import random
import time
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from scheduling.cluster.base import ClusterError

from .config import KubernetesSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class ResourceRef(NamedTuple):
    """A namespaced workload resource, served at /apis/<group>/<version>/namespaces/<ns>/<resource>."""

    group: str
    version: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}/{self.version}"


class ConflictError(ClusterError):
    """409: the object changed since it was read (or already exists); re-read and try again."""


class GoneError(ClusterError):
    """410: the resource version a watch started from is too old; list again."""


def _describe(exc: ApiException) -> str:
    message = ""
    try:
        message = json.loads(exc.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        message = (exc.body or "")[:200] if isinstance(exc.body, str) else ""
    return f"{exc.status} {exc.reason or ''}: {message}".strip().rstrip(":")


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, ApiException):
        # status 0 is what the client reports when the connection itself failed.
        return exc.status in (0, None, 429) or (exc.status or 0) >= 500
    return isinstance(exc, (Urllib3Error, ConnectionError, TimeoutError))


class KubeApi:
    """Each call retries transient failures with exponential backoff and returns plain dicts."""

    def __init__(
        self,
        api_client: client.ApiClient,
        settings: KubernetesSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ):
        self.api_client = api_client
        self.settings = settings
        self.core = client.CoreV1Api(api_client)
        # Jobs, JobSets and PyTorchJobs alike: the custom-objects client builds the same URLs for built-in groups.
        self.objects = client.CustomObjectsApi(api_client)
        self._sleep = sleep
        self._jitter = jitter

    # --- the retry loop -----------------------------------------------------------------------

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one API call; returns the decoded JSON body. Raises ClusterError (or a subclass)."""
        kwargs.setdefault("_request_timeout", self.settings.request_timeout_s)
        kwargs["_preload_content"] = False
        attempts = max(1, self.settings.retry_attempts)
        for attempt in range(1, attempts + 1):
            try:
                response = fn(*args, **kwargs)
                return json.loads(response.data or b"null")
            except ApiException as exc:
                if exc.status == 409:
                    raise ConflictError(f"{what}: {_describe(exc)}", status=409) from exc
                if exc.status == 410:
                    raise GoneError(f"{what}: {_describe(exc)}", status=410) from exc
                if not _is_transient(exc) or attempt == attempts:
                    raise ClusterError(
                        f"{what} failed after {attempt} attempt(s): {_describe(exc)}", status=exc.status
                    ) from exc
                error: Exception = exc
            except (Urllib3Error, ConnectionError, TimeoutError) as exc:
                if attempt == attempts:
                    raise ClusterError(f"{what} failed after {attempt} attempt(s): {exc}") from exc
                error = exc
            except ValueError as exc:
                raise ClusterError(f"{what}: the API answered with invalid JSON: {exc}") from exc
            delay = self.backoff_delay_s(attempt)
            log.warning("%s: %s; retrying in %.2fs (attempt %d of %d)", what, error, delay, attempt, attempts)
            self._sleep(delay)
        raise AssertionError("unreachable")

    def backoff_delay_s(self, attempt: int) -> float:
        """Exponential, capped, with up to 10% jitter so many workers do not retry in lockstep."""
        base = min(self.settings.retry_max_delay_s, self.settings.retry_base_delay_s * 2 ** (attempt - 1))
        return base * (1 + 0.1 * self._jitter())

    def on_conflict_retry(self, what: str, attempt_fn: Callable[[], T]) -> T:
        """Run a read-modify-write until it does not conflict; `attempt_fn` must re-read each time."""
        attempts = max(1, self.settings.retry_attempts)
        for attempt in range(1, attempts + 1):
            try:
                return attempt_fn()
            except ConflictError as exc:
                if attempt == attempts:
                    raise ClusterError(f"{what}: still conflicting after {attempt} attempts: {exc}", status=409)
                log.info("%s: conflict, re-reading (attempt %d of %d)", what, attempt, attempts)
        raise AssertionError("unreachable")

    # --- reads ----------------------------------------------------------------------------------

    def _namespaces(self) -> tuple[str | None, ...]:
        return self.settings.namespaces or (None,)

    def list_nodes(self) -> tuple[list[dict], str]:
        body = self.call("list nodes", self.core.list_node)
        return body.get("items") or [], body.get("metadata", {}).get("resourceVersion", "")

    def list_pods(self, label_selector: str | None = None, namespace: str | None = None) -> tuple[list[dict], str]:
        return self._list_namespaced(
            "pods", self.core.list_pod_for_all_namespaces, self.core.list_namespaced_pod, label_selector, namespace
        )

    def list_objects(
        self, ref: ResourceRef, label_selector: str | None = None, namespace: str | None = None
    ) -> tuple[list[dict], str]:
        """A 404 means the resource is not served (its CRD is not installed): the ClusterError says so."""
        return self._list_namespaced(
            str(ref),
            lambda **kw: self.objects.list_custom_object_for_all_namespaces(ref.group, ref.version, ref.resource, **kw),
            lambda ns, **kw: self.objects.list_namespaced_custom_object(ref.group, ref.version, ns, ref.resource, **kw),
            label_selector, namespace,
        )

    def _list_namespaced(self, kind, list_all, list_one, label_selector, namespace) -> tuple[list[dict], str]:
        """One namespace, every configured namespace, or all; the resource version of the last list."""
        kwargs = {"label_selector": label_selector} if label_selector else {}
        namespaces = (namespace,) if namespace else self._namespaces()
        items: list[dict] = []
        resource_version = ""
        for ns in namespaces:
            if ns is None:
                body = self.call(f"list {kind}", list_all, **kwargs)
            else:
                body = self.call(f"list {kind} in {ns}", list_one, ns, **kwargs)
            items.extend(body.get("items") or [])
            resource_version = body.get("metadata", {}).get("resourceVersion", "")
        return items, resource_version

    def get_object(self, ref: ResourceRef, namespace: str, name: str) -> dict | None:
        try:
            return self.call(f"read {ref.resource} {namespace}/{name}", self.objects.get_namespaced_custom_object,
                             ref.group, ref.version, namespace, ref.resource, name)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    # --- writes ---------------------------------------------------------------------------------

    def patch_object(self, ref: ResourceRef, namespace: str, name: str, patch: dict) -> dict:
        return self.call(
            f"patch {ref.resource} {namespace}/{name}", self.objects.patch_namespaced_custom_object,
            ref.group, ref.version, namespace, ref.resource, name, patch, _content_type=MERGE_PATCH,
        )

    def patch_pod(self, namespace: str, name: str, patch: dict | list) -> dict:
        content_type = JSON_PATCH if isinstance(patch, list) else MERGE_PATCH
        return self.call(
            f"patch pod {namespace}/{name}",
            self.core.patch_namespaced_pod, name, namespace, patch, _content_type=content_type,
        )

    def create_object(self, ref: ResourceRef, namespace: str, body: dict) -> dict:
        name = body.get("metadata", {}).get("name", "")
        return self.call(f"create {ref.resource} {namespace}/{name}", self.objects.create_namespaced_custom_object,
                         ref.group, ref.version, namespace, ref.resource, body)

    # --- watches --------------------------------------------------------------------------------

    def watch(
        self, kind: str | ResourceRef, resource_version: str, *, namespace: str | None = None,
        label_selector: str | None = None, timeout_s: int | None = None, watcher: watch.Watch | None = None,
    ) -> Iterator[dict]:
        """Raw watch events ({"type", "object"}) after `resource_version`; GoneError when it expired.
        `kind` is "nodes", "pods" or a workload resource."""
        if isinstance(kind, ResourceRef):
            ref = kind
            args: tuple = (ref.group, ref.version, namespace, ref.resource) if namespace else (ref.group, ref.version, ref.resource)
            fn = self.objects.list_namespaced_custom_object if namespace else self.objects.list_custom_object_for_all_namespaces
        else:
            list_all, list_one = {
                "nodes": (self.core.list_node, None),
                "pods": (self.core.list_pod_for_all_namespaces, self.core.list_namespaced_pod),
            }[kind]
            args = (namespace,) if namespace and list_one else ()
            fn = list_one if args else list_all
        stream = watcher or watch.Watch()
        timeout = timeout_s or self.settings.watch_timeout_s
        kwargs = {"label_selector": label_selector} if label_selector else {}
        try:
            for event in stream.stream(
                fn, *args, resource_version=resource_version, timeout_seconds=int(timeout),
                allow_watch_bookmarks=True, **kwargs,
                # The client-side read timeout stops a silent connection from blocking forever.
                _request_timeout=(self.settings.request_timeout_s, timeout + 10),
            ):
                if event.get("type") == "ERROR":
                    status = (event.get("object") or {}).get("code")
                    if status == 410:
                        raise GoneError(f"watch {kind}: resource version {resource_version} expired", status=410)
                    raise ClusterError(f"watch {kind}: {event.get('object')}", status=status)
                # The client's ERROR handling needs deserialized events; we hand on the raw dict.
                yield {"type": event.get("type"), "object": event.get("raw_object") or {}}
        except ApiException as exc:
            if exc.status == 410:
                raise GoneError(f"watch {kind}: {_describe(exc)}", status=410) from exc
            raise ClusterError(f"watch {kind}: {_describe(exc)}", status=exc.status) from exc
        except (Urllib3Error, ConnectionError, TimeoutError) as exc:
            raise ClusterError(f"watch {kind}: connection lost: {exc}") from exc
