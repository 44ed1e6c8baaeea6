"""A kopf module loaded beside kubetrain.reconcile by tests only: a few seconds after start it ends the operator's
leader election loop, as an unforeseen error would, so that a test can see what the liveness endpoint says then."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

ENDS_AFTER_SECONDS = 5.0
_tasks: set[asyncio.Task[None]] = set()


@kopf.on.startup()
async def end_the_leader_election_soon(memo: kopf.Memo, **_: Any) -> None:
    async def later() -> None:
        await asyncio.sleep(ENDS_AFTER_SECONDS)
        memo.controller._leader.cancel()

    task = asyncio.create_task(later())
    _tasks.add(task)
