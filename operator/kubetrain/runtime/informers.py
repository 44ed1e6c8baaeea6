"""The watches of every kind the operator reads, feeding one store on the event loop.

Each watch runs in a thread of its own; what it lists or sees is handed to the event loop, which changes the store
and then tells `changed` which jobs it touched, in that order: whatever runs next on the loop reads the store as
that change left it. `synced()` returns once every watch has listed once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from kubetrain.runtime.store import JobKey, Obj, Store
from kubetrain.runtime.watch import Resource, Transport, Watch

LISTED = "LISTED"  # a complete (re)listing: `changed` gets the jobs whose objects changed, with no object
Changed = Callable[[str, str, Obj | None, set[JobKey]], None]  # (field, event type, object, jobs touched)


class Informers:
    def __init__(self, store: Store, changed: Changed) -> None:
        self.store = store
        self._changed = changed
        self._watches: list[Watch] = []
        self._threads: list[threading.Thread] = []
        self._unlisted: set[str] = set()
        self._all_listed = asyncio.Event()

    def add(self, field: str, resource: Resource, transport: Transport, keep: Callable[[Obj], dict[str, Any]]) -> None:
        """Watch `resource` into the store's `field` (several resources may feed one field: one per namespace)."""
        loop = asyncio.get_running_loop()
        name = f"{field}:{resource.namespace or '*'}"
        self._unlisted.add(name)

        def on_list(objects: list[dict[str, Any]]) -> None:
            loop.call_soon_threadsafe(self._listed, name, field, objects)

        def on_event(kind: str, obj: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._event, field, kind, obj)

        self._watches.append(Watch(resource, transport, keep, on_list, on_event))

    def start(self) -> None:
        for watch in self._watches:
            thread = threading.Thread(target=watch.run, name=f"watch {watch.resource.path}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if not self._unlisted:
            self._all_listed.set()

    async def synced(self) -> None:
        await self._all_listed.wait()

    @property
    def is_synced(self) -> bool:
        return self._all_listed.is_set()

    def stop(self) -> None:
        """Ask every watch to end (each ends at its next event or read timeout; the threads do not hold the
        process)."""
        for watch in self._watches:
            watch.stop()

    def _listed(self, name: str, field: str, objects: list[dict[str, Any]]) -> None:
        touched, gone = self.store.replace(field, objects)
        for obj in gone:  # deleted while no watch ran (a relist after 410 Gone or an outage)
            self._changed(field, "DELETED", obj, self.store.jobs_of(field, obj))
        self._changed(field, LISTED, None, touched)
        self._unlisted.discard(name)
        if not self._unlisted:
            self._all_listed.set()

    def _event(self, field: str, kind: str, obj: dict[str, Any]) -> None:
        touched = self.store.remove(field, obj) if kind == "DELETED" else self.store.put(field, obj)
        self._changed(field, kind, obj, touched)
