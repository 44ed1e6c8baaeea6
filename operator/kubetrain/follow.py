"""`kubetrain status --watch` and `kubetrain wait`: what to print and how to exit, decided from status snapshots.

Pure functions of plain data. The loop in kubetrain.follow_loop feeds them what the API server sends.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from kubetrain import reasons
from kubetrain.pod_state import headline_metric

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
# A usage error, a job that does not exist (or was deleted), a cluster that cannot be asked.
EXIT_USAGE = 2
# What timeout(1) exits with when its time is up.
EXIT_TIMEOUT = 124
EXIT_CODES = {reasons.SUCCEEDED: EXIT_SUCCEEDED, reasons.FAILED: EXIT_FAILED}  # one for each terminal phase


@dataclass(frozen=True)
class Snapshot:
    """The parts of a job's status a person follows. Two snapshots differ when one of these differs.

    The message and the epoch's metrics are carried along but not compared: they may change without anything a
    person follows changing. The metrics change with the epoch, which is compared.
    """

    phase: str
    reason: str = ""
    ready: int | None = None
    total: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    metric: str | None = None
    restarts: int = 0
    startup: str | None = None  # the last startup phase reached and the seconds to it, e.g. WorkersReady@5s
    message: str = field(default="", compare=False)
    metrics: Mapping[str, float] = field(default_factory=dict, compare=False)

    @property
    def finished(self) -> bool:
        return self.phase in reasons.TERMINAL_PHASES


def snapshot(body: Mapping[str, Any]) -> Snapshot:
    """The snapshot of a DistributedTraining as the API server returns it.

    A job the operator has not seen yet has no status: it is Pending. The metric is the METRIC column's.
    """
    status = body.get("status") or {}
    workers = status.get("workers") or {}
    progress = status.get("progress") or {}
    return Snapshot(
        phase=status.get("phase") or reasons.PENDING,
        reason=status.get("reason") or "",
        ready=workers.get("ready"),
        total=workers.get("total"),
        epoch=progress.get("epoch"),
        epochs=progress.get("epochs"),
        metric=headline_metric(progress),
        restarts=status.get("restarts") or 0,
        startup=startup_word(status.get("startup")),
        message=status.get("message") or "",
        metrics=dict(progress.get("metrics") or {}),
    )


def startup_word(startup: Any) -> str | None:
    """`<last phase reached>@<seconds from the first>s` of status.startup, or None before any phase."""
    phases = startup.get("phases") if isinstance(startup, Mapping) else None
    if not phases or not isinstance(phases[-1], Mapping):
        return None
    total = startup.get("seconds")
    return f"{phases[-1].get('name')}@{total:g}s" if isinstance(total, int | float) else str(phases[-1].get("name"))


def changes(snapshots: Iterable[Snapshot | None], previous: Snapshot | None = None) -> Iterator[Snapshot | None]:
    """Each snapshot that differs from the one before it, up to the first finished one.

    `previous` is the status already shown. None stands for a job that is gone: it ends the sequence too.
    """
    if previous is not None and previous.finished:
        return
    for current in snapshots:
        if current is None:
            yield None
            return
        if current != previous:
            yield current
            if current.finished:
                return
        previous = current


def details(snap: Snapshot) -> list[str]:
    """Workers, startup, epoch, metric and restarts as key=value words; what is not known yet is left out."""
    words = []
    if snap.total is not None:
        words.append(f"workers={snap.ready or 0}/{snap.total}")
    if snap.startup:
        words.append(f"startup={snap.startup}")
    if snap.epoch is not None:
        words.append(f"epoch={snap.epoch}/{snap.epochs}" if snap.epochs else f"epoch={snap.epoch}")
    if snap.metric:
        words.append(snap.metric)
    words.append(f"restarts={snap.restarts}")
    return words


def timestamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def line(snap: Snapshot, at: datetime) -> str:
    """One line for one change: when, the phase, then key=value words. A finished job's line ends with its message."""
    words = [timestamp(at), f"{snap.phase:<10}"]
    if snap.reason:
        words.append(f"reason={snap.reason}")
    words.extend(details(snap))
    text = " ".join(words)
    if snap.finished and snap.message:
        text += f" message: {snap.message}"
    return text


def exit_code(snap: Snapshot | None) -> int | None:
    """0 Succeeded, 1 Failed, 2 when the job is gone; None while it runs."""
    if snap is None:
        return EXIT_USAGE
    return EXIT_CODES.get(snap.phase)


def summary(namespace: str, name: str, snap: Snapshot) -> str:
    """The one line `kubetrain wait` prints when the job finished: phase, why, then the details."""
    why = f": {snap.reason}" if snap.reason else ""
    if snap.reason and snap.message:
        why += f": {snap.message}"
    return f"{namespace}/{name} {snap.phase}{why} ({', '.join(details(snap))})"


def not_found(namespace: str, name: str) -> str:
    return f"DistributedTraining {namespace}/{name} not found"


def deleted(namespace: str, name: str) -> str:
    return f"DistributedTraining {namespace}/{name} was deleted before it finished"


def timed_out(namespace: str, name: str, seconds: float, snap: Snapshot | None) -> str:
    """Why `kubetrain wait` gave up, and where the job was then."""
    where = "" if snap is None else f": it is {snap.phase} ({', '.join(details(snap))})"
    return f"timed out after {seconds:g}s waiting for DistributedTraining {namespace}/{name} to finish{where}"
