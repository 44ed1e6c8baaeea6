"""List, then watch, one kind of object in one namespace (or all), as client-go's reflector does: the list's
resourceVersion starts the watch, bookmarks and events move it on, a watch that ends is resumed from there, and
410 Gone (the version left etcd's window) lists again. Runs in a thread of its own; every object is reduced to what
the operator keeps (`keep`) before it leaves that thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from kubernetes.dynamic import DynamicClient

log = logging.getLogger(__name__)
Obj = dict[str, Any]
LIST_PAGE = 500  # objects per list request: bounds the memory a relist of thousands of pods takes at once
WATCH_SECONDS = 300  # the API server ends each watch after this long; it is resumed from the last version
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 30.0


@dataclass(frozen=True)
class Resource:
    api_version: str  # "v1", "batch/v1", "kubetrain.dev/v1alpha1"
    kind: str
    plural: str
    namespace: str | None = None  # None: every namespace
    label_selector: str | None = None

    @property
    def path(self) -> str:
        prefix = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        where = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{prefix}{where}/{self.plural}"


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Transport(Protocol):
    """The two reads a watch makes: a page of a list, and a watch's stream of JSON lines."""

    def list(self, path: str, params: dict[str, Any]) -> Obj: ...

    def watch(self, path: str, params: dict[str, Any]) -> Iterator[bytes]: ...


class ApiTransport:
    """The reads through the official client (its authentication, TLS and connection pool), decoded with orjson (the
    JSON of every watch event is most of what the operator parses)."""

    def __init__(self, dynamic: DynamicClient, read_timeout: float = WATCH_SECONDS + 60) -> None:
        self.dynamic = dynamic
        self.read_timeout = read_timeout

    def list(self, path: str, params: dict[str, Any]) -> Obj:
        response = self.dynamic.request("get", path, serialize=False, _request_timeout=(10, 60), **params)
        page: Obj = orjson.loads(response.data)
        return page

    def watch(self, path: str, params: dict[str, Any]) -> Iterator[bytes]:
        response = self.dynamic.request("get", path, watch=True, serialize=False,
                                        _request_timeout=(10, self.read_timeout), **params)
        try:
            yield from response  # urllib3's response yields the body line by line: one event per line
        finally:
            response.close()
            response.release_conn()


@dataclass
class Watch:
    """`on_list(objects)` after each complete list, `on_event(type, object)` for each ADDED/MODIFIED/DELETED; both
    from this watch's thread, with objects already reduced by `keep`."""

    resource: Resource
    transport: Transport
    keep: Callable[[Obj], Obj]
    on_list: Callable[[list[Obj]], None]
    on_event: Callable[[str, Obj], None]
    first_retry_seconds: float = FIRST_RETRY_SECONDS

    def __post_init__(self) -> None:
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Until `stop()`: list, watch, resume, relist; errors are logged and retried with a doubling delay."""
        version: str | None = None
        delay = self.first_retry_seconds
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                delay = self.first_retry_seconds
            except Gone:
                version = None
            except Exception as error:  # the API server restarting, a network fault: resume once it answers
                log.warning("watch of %s: %s; again in %.1fs", self.resource.path, error, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, MAX_RETRY_SECONDS)

    def _list(self) -> str:
        params: dict[str, Any] = {"limit": LIST_PAGE, "label_selector": self.resource.label_selector}
        objects: list[Obj] = []
        while True:
            page = self.transport.list(self.resource.path, params)
            objects += [self._reduce(item) for item in page.get("items") or []]
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                break
            params["_continue"] = meta["continue"]
        self.on_list(objects)
        return str(meta.get("resourceVersion") or "")

    def _watch(self, version: str) -> str:
        params = {"resource_version": version, "allow_watch_bookmarks": True, "timeout_seconds": WATCH_SECONDS,
                  "label_selector": self.resource.label_selector}
        for kind, obj in events(self.transport.watch(self.resource.path, params)):
            if self._stop.is_set():
                break
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.on_event(kind, self._reduce(obj))
        return version

    def _reduce(self, obj: Obj) -> Obj:
        obj.setdefault("apiVersion", self.resource.api_version)  # list items of built-in kinds come without them
        obj.setdefault("kind", self.resource.kind)
        return self.keep(obj)


def events(lines: Iterable[bytes]) -> Iterator[tuple[str, Obj]]:
    """(type, object) for each line of a watch; an ERROR event raises (Gone for 410)."""
    for line in lines:
        if not line.strip():
            continue
        event = orjson.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone(obj.get("message", "resourceVersion too old"))
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        yield str(kind), obj
