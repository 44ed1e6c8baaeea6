"""Rank 0's callbacks per training step: every callback `fit_distributed` gives the cifar_mixup CNN, timed inside its
own hooks, as shipped (I/O on a background thread, progress and plot by time) and inline (every epoch's writes, plot
and status patch in the training thread), taking turns in one process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import processes
from .report import Row
from .stats import median

SECTION = "3 callbacks"
TARGET_PERCENT = 2.0


def measure(workdir: Path, steps_per_epoch: int, epochs: int, repeats: int) -> list[Row]:
    out = workdir / "callback-cost.json"
    processes.run("callback_cost", ["--threads", "2", "--steps-per-epoch", str(steps_per_epoch), "--epochs",
                                    str(epochs), "--repeats", str(repeats), "--scratch", str(workdir / "callbacks"),
                                    "--out", str(out)], threads=2)
    return rows(processes.read_json(out))


def percent_of_step_time(run: Mapping[str, Any]) -> dict[str, float]:
    """Each callback's seconds in its hooks as % of the run's step time (fit time less every callback's time)."""
    callbacks: Mapping[str, float] = run["callback_seconds"]
    steps_seconds = run["fit_seconds"] - sum(callbacks.values())
    return {name: 100 * seconds / steps_seconds for name, seconds in callbacks.items()}


def rows(result: Mapping[str, Any]) -> list[Row]:
    runs: Sequence[Mapping[str, Any]] = result["runs"]
    found = []
    for setting, label in (("background", "as shipped"), ("inline", "inline, every epoch (before)")):
        chosen = [run for run in runs if run["setting"] == setting]
        shares = [percent_of_step_time(run) for run in chosen]
        total = median([sum(share.values()) for share in shares])
        names = sorted({name for share in shares for name in share})
        each = ", ".join(f"{name} {median([share.get(name, 0.0) for share in shares]):.2f}%" for name in names)
        steps = median([(run["fit_seconds"] - sum(run["callback_seconds"].values())) / run["steps"]
                        for run in chosen])
        detail = (f"{each}; step {1000 * steps:.0f} ms, {result['steps_per_epoch']} steps per epoch x "
                  f"{result['epochs']} epochs, status patch {1000 * result['patch_seconds']:.0f} ms; median of "
                  f"{len(chosen)}")
        if setting == "background":
            cpu = median([100 * run["writer_cpu_seconds"] / run["fit_seconds"] for run in chosen])
            detail += f"; the background thread's CPU: {cpu:.2f}% of the fit's wall time"
            found.append(Row(SECTION, f"all callbacks, % of step time, {label}", total, "%",
                             target=f"< {TARGET_PERCENT:g}", meets=total < TARGET_PERCENT, detail=detail,
                             extra={"runs": [dict(run) for run in chosen]}))
        else:
            found.append(Row(SECTION, f"all callbacks, % of step time, {label}", total, "%", detail=detail,
                             extra={"runs": [dict(run) for run in chosen]}))
    return found
