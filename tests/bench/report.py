"""The benchmark table: rows, the printed and markdown tables, and the JSON document (pure, except `write_results`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One number of the table. `meets` is None when the row has no target (context numbers)."""

    section: str
    name: str
    value: float
    unit: str
    target: str = ""
    meets: bool | None = None
    detail: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def verdict(self) -> str:
        return "" if self.meets is None else ("meets" if self.meets else "misses")


def format_value(value: float) -> str:
    """Three significant digits, without scientific notation for the magnitudes a table shows."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table_cells(rows: Sequence[Row]) -> list[list[str]]:
    header = ["benchmark", "measure", "value", "target", "verdict", "notes"]
    body = [[r.section, r.name, f"{format_value(r.value)} {r.unit}".strip(), r.target, r.verdict(), r.detail]
            for r in rows]
    return [header, *body]


def format_text(rows: Sequence[Row]) -> str:
    """A fixed-width table for the terminal."""
    cells = table_cells(rows)
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
             for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def format_markdown(rows: Sequence[Row], meta: Mapping[str, Any]) -> str:
    """A markdown page: what ran where, then the table."""
    cells = table_cells(rows)

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    header = [f"# kubetrain benchmarks ({meta.get('size', '?')} size)", ""]
    header += [f"- {key}: {value}" for key, value in meta.items() if key != "size"]
    table = [line(cells[0]), line(["---"] * len(cells[0])), *(line(row) for row in cells[1:])]
    return "\n".join([*header, "", *table, ""])


def to_document(rows: Sequence[Row], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"meta": dict(meta), "rows": [{**asdict(r), "extra": dict(r.extra), "verdict": r.verdict()} for r in rows]}


def write_results(directory: Path, rows: Sequence[Row], meta: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write `latest.json` and `latest.md` into `directory`; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = directory / "latest.json", directory / "latest.md"
    json_path.write_text(json.dumps(to_document(rows, meta), indent=2) + "\n")
    markdown_path.write_text(format_markdown(rows, meta))
    return json_path, markdown_path
