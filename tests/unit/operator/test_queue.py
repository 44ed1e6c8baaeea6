"""The per-job work queue: one sync at a time per job, and a job whose sync keeps failing backs off exponentially
without holding up the others."""

from __future__ import annotations

import asyncio
import threading

from kubetrain.runtime.queue import SyncQueue


def test_failures_back_off_exponentially_per_job_and_reset_on_success():
    calls: list[str] = []
    outcome = {"bad": True}

    def sync(snapshot: str) -> float | None:
        calls.append(snapshot)
        if snapshot == "bad" and outcome["bad"]:
            raise RuntimeError("API server unavailable")
        return None

    async def scenario() -> list[float]:
        queue = SyncQueue(lambda key: key[1], sync, error_retry_seconds=1.0, max_retry_seconds=8.0)
        delays = []
        for _ in range(5):
            await queue.poke(("ns", "bad"))
            delays.append(queue.retry_delay(("ns", "bad")))
        await queue.poke(("ns", "good"))
        assert queue.retry_delay(("ns", "good")) == 1.0
        outcome["bad"] = False
        await queue.poke(("ns", "bad"))
        delays.append(queue.retry_delay(("ns", "bad")))
        for key in (("ns", "bad"), ("ns", "good")):
            queue.forget(key)
        return delays

    assert asyncio.run(scenario()) == [1.0, 2.0, 4.0, 8.0, 8.0, 1.0]
    assert calls.count("good") == 1


def test_a_job_gone_from_the_cache_is_not_synced():
    calls: list[str] = []

    async def scenario() -> None:
        queue = SyncQueue(lambda key: None, lambda snapshot: calls.append(snapshot), 1.0)
        await queue.poke(("ns", "deleted"))

    asyncio.run(scenario())
    assert calls == []


def test_pokes_that_arrive_while_a_job_waits_for_a_free_slot_join_one_pass():
    release, started = threading.Event(), threading.Event()
    synced: list[str] = []

    def sync(snapshot: str) -> None:
        if snapshot == "busy":
            started.set()
            release.wait(10)
        synced.append(snapshot)

    async def scenario() -> None:
        queue = SyncQueue(lambda key: key[1], sync, slots=1)
        queue.spawn(("ns", "busy"))
        await asyncio.to_thread(started.wait, 10)
        for _ in range(5):  # a burst of events for another job while the only slot is taken
            queue.spawn(("ns", "waiting"))
            await asyncio.sleep(0)
        release.set()
        for _ in range(50):  # the waiting job's pass, and time for any second one to show
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert synced == ["busy", "waiting"]
