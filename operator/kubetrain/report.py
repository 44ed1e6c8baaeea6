"""`kubetrain status`: a DistributedTraining's status as a short text a person reads at a glance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def format_status(body: Mapping[str, Any]) -> str:
    """Phase and why, workers, progress, checkpoint, then every condition."""
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
