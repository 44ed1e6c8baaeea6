"""A per-job work queue: one sync at a time per job, bursts of events coalesced, delayed re-syncs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubetrain.metrics import SYNC_ERRORS, SYNC_SECONDS

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)


class SyncQueue:
    """Run `sync(namespace, name) -> seconds | None` in worker threads, serialised per key."""

    def __init__(self, sync: Callable[[str, str], float | None], error_retry_seconds: float = 5.0) -> None:
        self._sync = sync
        self._error_retry = error_retry_seconds
        self._locks: dict[Key, asyncio.Lock] = {}
        self._dirty: set[Key] = set()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def poke(self, key: Key) -> None:
        """Ask for a sync of `key`; returns at once if one is running (it will run again)."""
        self._dirty.add(key)
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            return
        delay: float | None = None
        async with lock:
            while key in self._dirty:
                self._dirty.discard(key)
                delay = await self._run(key)
        self._schedule(key, delay)

    def forget(self, key: Key) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._dirty.discard(key)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    async def _run(self, key: Key) -> float | None:
        try:
            with SYNC_SECONDS.time():
                return await asyncio.to_thread(self._sync, *key)
        except Exception:  # the operator never dies on one job: log it and retry later
            SYNC_ERRORS.inc()
            log.exception("sync of %s/%s failed; retrying in %.0fs", key[0], key[1], self._error_retry)
            return self._error_retry

    def _schedule(self, key: Key, delay: float | None) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._spawn, key)

    def _spawn(self, key: Key) -> None:
        self._timers.pop(key, None)
        task = asyncio.ensure_future(self.poke(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
