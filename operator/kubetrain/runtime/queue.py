"""A per-job work queue: one sync at a time per job, at most `slots` at once, bursts of events coalesced, delayed
re-syncs, and per-job exponential backoff after errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from kubetrain.metrics import SYNC_ERRORS, SYNC_SECONDS

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)
Snapshot = TypeVar("Snapshot")


class RetryLater(RuntimeError):
    """A sync that cannot finish yet for a reason already reported to the user: retried with backoff, logged in one
    line."""


class SyncQueue(Generic[Snapshot]):
    """For each poked key: `read(key)` on the event loop (cheap: the watch-fed store, which only the loop changes),
    then `sync(snapshot) -> seconds | None` in a worker thread, serialised per key. A key waits for one of `slots`
    before its read, so every poke that arrives while it waits joins the same pass. `active()` False (a standby
    replica): pokes are dropped; the replica that becomes the leader pokes every job."""

    def __init__(self, read: Callable[[Key], Snapshot | None], sync: Callable[[Snapshot], float | None],
                 error_retry_seconds: float = 1.0, max_retry_seconds: float = 300.0,
                 active: Callable[[], bool] = lambda: True, slots: int = 16) -> None:
        self._read = read
        self._sync = sync
        self._active = active
        self._first_retry = error_retry_seconds
        self._max_retry = max_retry_seconds
        self._failures: dict[Key, int] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._dirty: set[Key] = set()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(slots)

    async def poke(self, key: Key) -> None:
        """Ask for a sync of `key`; returns at once if one is running (it will run again)."""
        self._dirty.add(key)
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            return
        delay: float | None = None
        async with lock:
            while key in self._dirty:
                async with self._slots:
                    self._dirty.discard(key)
                    delay = await self._run(key)
        self._schedule(key, delay)

    def forget(self, key: Key) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._dirty.discard(key)
        self._failures.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    def retry_delay(self, key: Key) -> float:
        """Seconds before the next try after the key's consecutive failures so far: doubling, capped."""
        failures = self._failures.get(key, 0)
        return min(self._first_retry * 2 ** max(failures - 1, 0), self._max_retry)

    async def _run(self, key: Key) -> float | None:
        if not self._active():
            return None
        try:
            snapshot = self._read(key)
            if snapshot is None:
                self._failures.pop(key, None)
                return None
            with SYNC_SECONDS.time():
                delay = await asyncio.to_thread(self._sync, snapshot)
        except Exception as error:  # the operator never dies on one job: log it and retry later, backing off
            SYNC_ERRORS.inc()
            self._failures[key] = self._failures.get(key, 0) + 1
            retry = self.retry_delay(key)
            line = "sync of %s/%s failed (%d in a row); retrying in %.1fs"
            if isinstance(error, RetryLater):
                log.warning(line + ": %s", *key, self._failures[key], retry, error)
            else:
                log.exception(line, *key, self._failures[key], retry)
            return retry
        self._failures.pop(key, None)
        return delay

    def _schedule(self, key: Key, delay: float | None) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self.spawn, key)

    def spawn(self, key: Key) -> None:
        """Poke `key` in a task of its own (kept until done), from code that cannot await; while its sync runs, only
        mark it to run again."""
        self._timers.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and lock.locked():
            self._dirty.add(key)
            return
        task = asyncio.ensure_future(self.poke(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
