"""A job as the notebook sees it (`Job`) and its per-epoch history, from its status and the snapshots seen. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain import follow, reasons


@dataclass(frozen=True)
class Job:
    """One DistributedTraining at one moment: its phase and why, its workers and rank 0's latest epoch."""

    name: str
    namespace: str
    phase: str
    reason: str = ""
    message: str = ""
    ready_workers: int | None = None
    workers: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    restarts: int = 0

    @property
    def finished(self) -> bool:
        return self.phase in reasons.TERMINAL_PHASES


def job_of(namespace: str, name: str, snap: follow.Snapshot) -> Job:
    return Job(name=name, namespace=namespace, phase=snap.phase, reason=snap.reason, message=snap.message,
               ready_workers=snap.ready, workers=snap.total, epoch=snap.epoch, epochs=snap.epochs,
               metrics=dict(snap.metrics), restarts=snap.restarts)


def job_from_body(body: Mapping[str, Any]) -> Job:
    """The Job of a DistributedTraining as the API server returns it."""
    metadata = body.get("metadata") or {}
    return job_of(str(metadata.get("namespace", "")), str(metadata.get("name", "")), follow.snapshot(body))


def history_rows(seen: Iterable[Job]) -> list[dict[str, Any]]:
    """One row per epoch, `{"epoch": n, <metric>: value, ...}`, in epoch order, from the epochs seen.

    Where an epoch was seen twice (a restart that resumed from an earlier checkpoint trains it again), the later one
    wins.
    """
    rows: dict[int, dict[str, Any]] = {}
    for job in seen:
        if job.epoch is not None and job.metrics:
            rows[job.epoch] = {"epoch": job.epoch, **job.metrics}
    return [rows[epoch] for epoch in sorted(rows)]


def reported_rows(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The rows of status.progress.history, in epoch order; None when rank 0 sent no history (an older trainlib)."""
    progress = (body.get("status") or {}).get("progress") or {}
    entries = progress.get("history")
    if not isinstance(entries, list):
        return None
    rows = {entry["epoch"]: {"epoch": entry["epoch"], **(entry.get("metrics") or {})}
            for entry in entries if isinstance(entry, Mapping) and isinstance(entry.get("epoch"), int)}
    return [rows[epoch] for epoch in sorted(rows)]


def job_history(body: Mapping[str, Any], seen: Iterable[Job]) -> list[dict[str, Any]]:
    """The job's rows: its status's history, after the seen epochs older than it (it keeps the last epochs only).

    A status without a history holds the latest epoch alone: then the rows are the epochs seen and that one.
    """
    reported = reported_rows(body)
    if reported is None:
        return history_rows([*seen, job_from_body(body)])
    first = reported[0]["epoch"] if reported else None
    older = [row for row in history_rows(seen) if first is None or row["epoch"] < first]
    return older + reported


def as_frame(rows: list[dict[str, Any]]) -> Any:
    """The rows as a pandas DataFrame indexed by epoch; pandas is imported only here."""
    try:
        import pandas
    except ImportError:
        raise ImportError("history(as_frame=True) needs pandas: pip install pandas, or call history() for a list of "
                          "dicts") from None
    return pandas.DataFrame(rows, columns=_columns(rows)).set_index("epoch")


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    names = dict.fromkeys(key for row in rows for key in row if key != "epoch")
    return ["epoch", *names]


def failed_text(job: Job) -> str:
    """`ml/cifar Failed: LauncherFailed: launcher pod ... exited 1`."""
    words = [f"{job.namespace}/{job.name} {job.phase}"]
    words += [part for part in (job.reason, job.message) if part]
    return ": ".join(words)
