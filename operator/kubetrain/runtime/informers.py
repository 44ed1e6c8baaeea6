"""The watches of every kind the operator reads, feeding one store on the event loop.

Each watch runs in a thread of its own; what it lists or sees is handed to the event loop, which changes the store
and then tells `changed` which jobs it touched, in that order: whatever runs next on the loop reads the store as
that change left it.

A namespace is ready once every watch it needs has listed once (a cluster-wide watch counts for every namespace);
`on_ready` is told when one becomes so. A watch that cannot list (forbidden, not served) keeps only its own namespace
from being ready, and no namespace at all when it is optional (`required=False`). Such a refusal is logged, counted in
the kubetrain_watch_refused metric and told to `on_refused`, and so is its end."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.metrics import WATCH_REFUSED
from kubetrain.runtime.liveness import Loop
from kubetrain.runtime.store import JobKey, Obj, Store
from kubetrain.runtime.watch import QUIET_SECONDS, Resource, Transport, Watch

log = logging.getLogger(__name__)
LISTED = "LISTED"  # a complete (re)listing: `changed` gets the jobs whose objects changed, with no object
Changed = Callable[[str, str, Obj | None, set[JobKey]], None]  # (field, event type, object, jobs touched)
Ready = Callable[[str | None], None]  # this namespace (None: every namespace) has become ready
Refused = Callable[[str, Resource, str | None], None]  # (field, resource, the refusal; None once it lists again)


@dataclass
class Watched:
    """One watch and what the informers know of it."""

    field: str
    resource: Resource
    required: bool
    watch: Watch | None = None
    thread: threading.Thread | None = None
    listed: bool = False  # it has listed at least once
    refused: str | None = None  # the API server's refusal, while it lasts

    @property
    def name(self) -> str:
        return f"watch of {self.resource.path}"


def resource_label(resource: Resource) -> str:
    """The resource as kubectl names it: `pods`, `distributedtrainings.kubetrain.dev`."""
    group = resource.api_version.rpartition("/")[0]
    return f"{resource.plural}.{group}" if group else resource.plural


class Informers:
    def __init__(self, store: Store, changed: Changed, on_ready: Ready = lambda namespace: None,
                 on_refused: Refused = lambda field, resource, refusal: None) -> None:
        self.store = store
        self._changed = changed
        self._on_ready = on_ready
        self._on_refused = on_refused
        self._watched: list[Watched] = []

    def add(self, field: str, resource: Resource, transport: Transport, keep: Callable[[Obj], dict[str, Any]],
            required: bool = True) -> None:
        """Watch `resource` into the store's `field` (several resources may feed one field: one per namespace).
        Without `required`, jobs do not wait for it to list."""
        loop = asyncio.get_running_loop()
        watched = Watched(field, resource, required)

        def on_list(objects: list[dict[str, Any]]) -> None:
            loop.call_soon_threadsafe(self._listed, watched, objects)

        def on_event(kind: str, obj: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._event, field, kind, obj)

        def on_trouble(refusal: str | None) -> None:
            loop.call_soon_threadsafe(self._trouble, watched, refusal)

        watched.watch = Watch(resource, transport, keep, on_list, on_event, on_trouble=on_trouble)
        self._watched.append(watched)

    def start(self) -> None:
        for watched in self._watched:
            assert watched.watch is not None
            watched.thread = threading.Thread(target=watched.watch.run, name=watched.name, daemon=True)
            watched.thread.start()
        for namespace in {w.resource.namespace for w in self._watched if self.ready(w.resource.namespace)}:
            self._on_ready(namespace)  # nothing to wait for

    def ready(self, namespace: str | None) -> bool:
        """Every watch the jobs of `namespace` need has listed (None: the cluster-wide watches)."""
        return all(w.listed for w in self._watched if w.required and w.resource.namespace in (None, namespace))

    def refusals(self) -> list[Watched]:
        """The watches whose list the API server refuses now."""
        return [w for w in self._watched if w.refused is not None]

    def loops(self) -> list[Loop]:
        """Every watch as a loop for the liveness probe."""
        return [Loop(w.name, ended=w.thread is not None and not w.thread.is_alive() and not w.watch.stopped,
                     last_beat=w.watch.last_beat, quiet_seconds=QUIET_SECONDS)
                for w in self._watched if w.watch is not None]

    def stop(self) -> None:
        """Ask every watch to end (each ends at its next event or read timeout; the threads do not hold the
        process)."""
        for watched in self._watched:
            if watched.watch is not None:
                watched.watch.stop()

    def _listed(self, watched: Watched, objects: list[dict[str, Any]]) -> None:
        first = not watched.listed
        watched.listed = True
        touched, gone = self.store.replace(watched.field, objects)
        for obj in gone:  # deleted while no watch ran (a relist after 410 Gone or an outage)
            self._changed(watched.field, "DELETED", obj, self.store.jobs_of(watched.field, obj))
        self._changed(watched.field, LISTED, None, touched)
        if first and watched.required and self.ready(watched.resource.namespace):
            self._on_ready(watched.resource.namespace)

    def _event(self, field: str, kind: str, obj: dict[str, Any]) -> None:
        touched = self.store.remove(field, obj) if kind == "DELETED" else self.store.put(field, obj)
        self._changed(field, kind, obj, touched)

    def _trouble(self, watched: Watched, refusal: str | None) -> None:
        watched.refused = refusal
        label = resource_label(watched.resource)
        where = watched.resource.namespace or ""
        WATCH_REFUSED.labels(resource=label, namespace=where).set(0 if refusal is None else 1)
        scope = f"namespace {where}" if where else "any namespace"
        if refusal is None:
            log.info("%s can be listed in %s again", label, scope)
        elif watched.required:
            log.error("cannot list %s in %s (%s): the jobs there wait until the operator may list them", label,
                      scope, refusal)
        else:
            log.error("cannot list %s in %s (%s): jobs run without them", label, scope, refusal)
        self._on_refused(watched.field, watched.resource, refusal)
