"""The figures the reliability suite prints at the end of a run: faults, bad inputs, duplicates, orphans, losses.

Tests record what they injected and what they observed with `FIGURES`; tests/conftest.py prints the table in the
terminal summary and writes it to tests/reliability/results/latest.md (under pytest-xdist each worker's figures are
sent to the controller and merged first). A figure that no test recorded is shown as "not run", never as zero.
"""

from __future__ import annotations

import datetime
import platform
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "latest.md"


@dataclass
class Tally:
    """`tried` things of one kind, `ok` of them came through as they should."""

    tried: int = 0
    ok: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Figures:
    faults: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    inputs: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    counts: dict[str, int] = field(default_factory=dict)

    def fault(self, kind: str, survived: bool, note: str = "") -> None:
        """One fault injected; `survived`: the system came back to the expected state by itself."""
        tally = self.faults[kind]
        tally.tried += 1
        tally.ok += int(survived)
        if note and not survived:
            tally.notes.append(note)

    def bad_input(self, kind: str, clean: bool, note: str = "") -> None:
        """One malformed object tried; `clean`: rejected with a message naming the field, no crash, no hot loop."""
        tally = self.inputs[kind]
        tally.tried += 1
        tally.ok += int(clean)
        if note and not clean:
            tally.notes.append(note)

    def count(self, name: str, value: int) -> None:
        """Add to a figure that must stay 0 (duplicates, orphans, checkpoints lost, leaked keys, ...)."""
        self.counts[name] = self.counts.get(name, 0) + value

    def empty(self) -> bool:
        return not (self.faults or self.inputs or self.counts)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (lists, dicts, numbers, strings), to be sent from an xdist worker and merged."""
        return {"faults": {kind: asdict(tally) for kind, tally in self.faults.items()},
                "inputs": {kind: asdict(tally) for kind, tally in self.inputs.items()},
                "counts": dict(self.counts)}

    def merge(self, data: dict[str, Any]) -> None:
        """Add the figures of another process, given as `as_dict` made them."""
        for mine, theirs in ((self.faults, data["faults"]), (self.inputs, data["inputs"])):
            for kind, tally in theirs.items():
                into = mine[kind]
                into.tried += tally["tried"]
                into.ok += tally["ok"]
                into.notes += tally["notes"]
        for name, value in data["counts"].items():
            self.count(name, value)

    def markdown(self) -> str:
        lines = ["# kubetrain reliability and security figures", "",
                 f"Run {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} on {platform.node()} "
                 "(tests/reliability; the operator's own RBAC is proven by tests/controlplane/test_helm_install.py).",
                 "", "| Faults injected | Injected | Survived |", "|---|---:|---:|"]
        for kind, tally in sorted(self.faults.items()):
            lines.append(f"| {kind} | {tally.tried} | {tally.ok} |")
        total = Tally(sum(t.tried for t in self.faults.values()), sum(t.ok for t in self.faults.values()))
        lines += [f"| **all faults** | **{total.tried}** | **{total.ok}** |", "",
                  "| Bad input | Tried | Rejected cleanly |", "|---|---:|---:|"]
        for kind, tally in sorted(self.inputs.items()):
            lines.append(f"| {kind} | {tally.tried} | {tally.ok} |")
        total = Tally(sum(t.tried for t in self.inputs.values()), sum(t.ok for t in self.inputs.values()))
        lines += [f"| **all bad inputs** | **{total.tried}** | **{total.ok}** |", "",
                  "| Must be zero | Count |", "|---|---:|"]
        for name in MUST_BE_ZERO:
            value = self.counts.get(name)
            lines.append(f"| {name} | {'not run' if value is None else value} |")
        for name, value in sorted(self.counts.items()):
            if name not in MUST_BE_ZERO:
                lines.append(f"| {name} | {value} |")
        notes = [f"- {kind}: {note}" for group in (self.faults, self.inputs)
                 for kind, tally in sorted(group.items()) for note in tally.notes]
        if notes:
            lines += ["", "Not survived / not clean:", *notes]
        return "\n".join(lines) + "\n"


MUST_BE_ZERO = ("duplicate children", "orphaned children", "checkpoints lost", "unreadable latest checkpoints",
                "private keys leaked", "hot-looping bad objects", "operator crashes")

FIGURES = Figures()
