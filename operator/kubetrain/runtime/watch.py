"""List, then watch, one kind of object in one namespace (or all), as client-go's reflector does: the list's
resourceVersion starts the watch, bookmarks and events move it on, a watch that ends is resumed from there, and
410 Gone (the version left etcd's window) lists again. Runs in a thread of its own; every object is reduced to what
the operator keeps (`keep`) before it leaves that thread.

No error ends the loop: each is logged and retried with a doubling delay. A refusal that retrying alone will not mend
(403 Forbidden, 404 the API is not served) is also handed to `on_trouble`, and cleared once a list succeeds. The loop
stamps `last_beat` as it goes round, so that a stuck or dead watch can be told from a quiet one."""

from __future__ import annotations

import logging
import threading
import time
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
# The longest a healthy watch goes without a beat: a stream the API server ends after WATCH_SECONDS, or one that hangs
# until the read timeout (WATCH_SECONDS + 60).
QUIET_SECONDS = 2 * WATCH_SECONDS + 60
REFUSALS = (401, 403, 404)  # Unauthorized, Forbidden, NotFound (the API is not served): retries alone do not mend


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


def refusal(error: Exception) -> str | None:
    """The API server's refusal of a list or watch, in one line; None for any other error (a network fault, a
    restart), which retrying mends."""
    status = getattr(error, "status", None)
    if status not in REFUSALS:
        return None
    reason = getattr(error, "reason", "") or ""
    return f"{status} {reason}".strip()


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
    on_trouble: Callable[[str | None], None] = lambda problem: None  # a refusal (see `refusal`); None: mended

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self.last_beat = time.monotonic()
        self._refused: str | None = None

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Until `stop()`: list, watch, resume, relist; errors are logged and retried with a doubling delay."""
        try:
            self._run()
        finally:
            if not self._stop.is_set():  # only what is not an Exception gets here (the liveness probe then fails)
                log.error("watch of %s has ended", self.resource.path)

    def _run(self) -> None:
        version: str | None = None
        delay = self.first_retry_seconds
        while not self._stop.is_set():
            self.last_beat = time.monotonic()
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                delay = self.first_retry_seconds
            except Gone:
                version = None
            except Exception as error:  # the API server restarting, a network fault, a refusal: retry, backing off
                self._failed(error, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, MAX_RETRY_SECONDS)

    def _failed(self, error: Exception, delay: float) -> None:
        problem = refusal(error)
        if problem is not None and problem == self._refused:  # told already: the informers logged it as an error
            log.debug("watch of %s: %s; again in %.1fs", self.resource.path, problem, delay)
            return
        log.warning("watch of %s: %s; again in %.1fs", self.resource.path, problem or error, delay)
        if problem is not None:
            self._refused = problem
            self._tell(problem)

    def _tell(self, problem: str | None) -> None:
        try:
            self.on_trouble(problem)
        except Exception:  # reporting must never stop the watch
            log.exception("watch of %s: could not report %s", self.resource.path, problem or "its recovery")

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
            self.last_beat = time.monotonic()
        self.on_list(objects)
        self._mended()
        return str(meta.get("resourceVersion") or "")

    def _watch(self, version: str) -> str:
        params = {"resource_version": version, "allow_watch_bookmarks": True, "timeout_seconds": WATCH_SECONDS,
                  "label_selector": self.resource.label_selector}
        for kind, obj in events(self.transport.watch(self.resource.path, params)):
            if self._stop.is_set():
                break
            self.last_beat = time.monotonic()
            self._mended()
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.on_event(kind, self._reduce(obj))
        self._mended()
        return version

    def _mended(self) -> None:
        """A list or watch went through: a refusal told before is over."""
        if self._refused is not None:
            self._refused = None
            self._tell(None)

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
