"""Time from `kubectl apply` to the first training step, phase by phase, and its rows (pure).

A `Start` is one job's start as the kind benchmark (first_step_kind.py) saw it: the seconds after the job was applied
at which every worker was scheduled, running and Ready, the launcher pod created and running, and, from rank 0's
`startup:` log lines, Horovod's world up and the first step done. The floor is the same program started again in pods
that already run, so only its last two phases exist.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .report import Row
from .stats import median, percentile, ratio

SECTION = "time to first step (kind)"
KUBETRAIN = "kubetrain"
PEER = "mpi-operator v0.8.0"
FLOOR = "floor"
CONTENDERS = (KUBETRAIN, PEER, FLOOR)
PHASES = ("workers scheduled", "workers running", "workers Ready", "launcher created", "launcher running", "world up",
          "first step")
WORLD_UP = re.compile(r"startup: Horovod's world up at (\S+Z)")
FIRST_STEP = re.compile(r"startup: first training step done at (\S+Z)")
KUBETRAIN_TARGET = 0.8  # of mpi-operator's time, same image, cluster and program
FLOOR_TARGET = 1.3  # of the floor's


@dataclass(frozen=True)
class Start:
    """One start: who ran it, with how many workers, and each phase's seconds after the job was applied. `reported`
    is a kubetrain job's own timeline (status.startup), phase by phase, on the same scale; `restarts` how often the
    contender's controller had to be started again meanwhile (it exited); `cpu` the CPU seconds that processes used
    from the apply to the first step, by name (its controller; the API server and etcd)."""

    contender: str
    workers: int
    seconds: dict[str, float]
    reported: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.seconds["first step"]


def log_times(log: str) -> dict[str, datetime]:
    """The world-up and first-step times rank 0 logged (trainlib.startup), by phase name; the first of each."""
    found = {}
    for phase, pattern in (("world up", WORLD_UP), ("first step", FIRST_STEP)):
        match = pattern.search(log)
        if match:
            found[phase] = datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
    return found


def _detail(starts: Sequence[Start]) -> str:
    """p90, the runs, and each phase's median, for the notes column."""
    totals = [start.total for start in starts]
    phases = [phase for phase in PHASES if all(phase in start.seconds for start in starts)]
    steps = ", ".join(f"{phase} {median([start.seconds[phase] for start in starts]):.1f}" for phase in phases)
    restarts = sum(start.restarts for start in starts)
    again = f"; its controller exited and was started again {restarts} time(s)" if restarts else ""
    names = [name for name in starts[0].cpu if all(name in start.cpu for start in starts)]
    cpu = ", ".join(f"{name} {median([start.cpu[name] for start in starts]):.1f}" for name in names)
    used = f"; median CPU s from apply to first step: {cpu}" if cpu else ""
    return f"p90 {percentile(totals, 90):.1f} s over {len(totals)} run(s){again}; median s after apply: {steps}{used}"


def rows(starts: Sequence[Start]) -> list[Row]:
    """Per worker count: each contender's median time to first step, then kubetrain's ratios to the peer and floor."""
    found: list[Row] = []
    for workers in sorted({start.workers for start in starts}):
        medians: dict[str, float] = {}
        for contender in CONTENDERS:
            chosen = [start for start in starts if start.workers == workers and start.contender == contender]
            if not chosen:
                continue
            medians[contender] = median([start.total for start in chosen])
            found.append(Row(SECTION, f"{contender}: apply -> first step, {workers} workers", medians[contender], "s",
                             detail=_detail(chosen),
                             extra={"runs": [start.seconds for start in chosen]}))
        for other, target in ((PEER, KUBETRAIN_TARGET), (FLOOR, FLOOR_TARGET)):
            if KUBETRAIN in medians and other in medians:
                value = ratio(medians[KUBETRAIN], medians[other])
                found.append(Row(SECTION, f"kubetrain / {other}: apply -> first step, {workers} workers", value, "x",
                                 target=f"<= {target}", meets=value <= target, detail="medians"))
    return found
