"""`kubetrain status`: a DistributedTraining's status as a short text a person reads at a glance."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from kubetrain.plan.model import read_time


def format_status(body: Mapping[str, Any], now: datetime | None = None) -> str:
    """Phase and why, workers, the startup timeline, progress, checkpoint, then every condition. `now` (UTC) says
    how long the attempt has waited for its next startup phase."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    phase = status.get("phase", "Pending (not seen by the operator yet)")
    lines = [f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}: {phase}"]
    if status.get("reason"):
        lines.append(f"  reason:     {status['reason']}: {status.get('message', '')}".rstrip(": "))
    workers = status.get("workers") or {}
    if workers:
        lines.append(
            f"  workers:    {workers.get('ready', 0)}/{workers.get('total', 0)} ready, "
            f"{status.get('restarts', 0)} restart(s)"
        )
    lines.extend(startup_lines(status.get("startup"), now or datetime.now(timezone.utc)))
    progress = status.get("progress") or {}
    if progress.get("epoch") is not None:
        metrics = ", ".join(
            f"{k}={v:.4g}" for k, v in sorted((progress.get("metrics") or {}).items()) if isinstance(v, int | float)
        )
        lines.append(
            f"  progress:   epoch {progress['epoch']}/{progress.get('epochs', '?')}"
            f"{', step ' + str(progress['step']) if progress.get('step') is not None else ''}"
            f"{'; ' + metrics if metrics else ''} (at {progress.get('updatedAt', '?')})"
        )
    checkpoint = status.get("checkpoint") or {}
    if checkpoint.get("path"):
        lines.append(f"  checkpoint: {checkpoint['path']} (epoch {checkpoint.get('epoch', '?')})")
    for key in ("startTime", "completionTime"):
        if status.get(key):
            lines.append(f"  {key + ':':<11} {status[key]}")
    conditions = status.get("conditions") or []
    if conditions:
        lines.append("  conditions:")
        lines.extend(
            f"    {c.get('type', '?'):<17} {c.get('status', '?'):<6} {c.get('reason', '')}: {c.get('message', '')}"
            for c in conditions
        )
    return "\n".join(lines) + "\n"


def startup_lines(startup: Any, now: datetime) -> list[str]:
    """The attempt's startup phases with the seconds each took, then what it waits for and for how long."""
    if not isinstance(startup, Mapping):
        return []
    steps: list[str] = []
    for phase in startup.get("phases") or []:
        seconds = phase.get("seconds") if isinstance(phase, Mapping) else None
        took = f" +{seconds:g}s" if steps and isinstance(seconds, int | float) else ""
        steps.append(f"{phase.get('name', '?') if isinstance(phase, Mapping) else '?'}{took}")
    total = startup.get("seconds")
    reached = f" ({total:g} s)" if isinstance(total, int | float) else ""
    lines = [f"  startup:    attempt {startup.get('attempt', '?')}{reached}: {', '.join(steps) or 'nothing yet'}"]
    if startup.get("waitingFor"):
        since = read_time(startup.get("waitingSince"))
        utc_now = now.astimezone(timezone.utc).replace(tzinfo=None) if now.tzinfo else now
        waited = f", {max(0.0, (utc_now - since).total_seconds()):.0f} s so far" if since else ""
        lines.append(f"  waiting:    for {startup['waitingFor']}{waited}")
    return lines

