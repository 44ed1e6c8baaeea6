"""The per-job work queue: one sync at a time per job, and a job whose sync keeps failing backs off exponentially
without holding up the others."""

from __future__ import annotations

import asyncio

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
