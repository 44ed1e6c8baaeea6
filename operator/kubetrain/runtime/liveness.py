"""Whether the operator's long-running loops still run: the leader election and every watch.

Each loop stamps a beat as it goes round. A loop that ended, or that has not beaten for longer than it ever should, is
a reason for the liveness probe to fail: a restart is then the cure. A loop that goes round but keeps failing (the API
server away, a refused list) is alive: a restart would not mend it, so it is reported elsewhere."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Loop:
    name: str
    ended: bool  # the loop's thread or task is over, though nobody asked it to stop
    last_beat: float  # time.monotonic() of its last beat
    quiet_seconds: float  # the longest it goes without a beat when healthy


def not_alive(loops: Iterable[Loop], now: float) -> list[str]:
    """One line for each loop that ended or is stuck; empty when all run."""
    found = []
    for loop in loops:
        if loop.ended:
            found.append(f"{loop.name} has ended")
        elif now - loop.last_beat > loop.quiet_seconds:
            found.append(f"{loop.name} has not moved for {now - loop.last_beat:.0f}s")
    return found

