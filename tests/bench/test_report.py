"""The table users read: every row printed with its unit, target and verdict; JSON and markdown written."""

from __future__ import annotations

import json
from pathlib import Path

from .report import Row, format_markdown, format_text, format_value, write_results

ROWS = [
    Row("2 horovod", "(c)/(a) images/s", 0.9712, "x", target=">= 0.95", meets=True, detail="2 ranks"),
    Row("4 memory", "peak RSS | 10x", 1.234, "x", target="<= 1.10", meets=False),
    Row("5 peak", "training FLOPs per image", 308.9215, "MFLOP"),
]


def test_values_keep_three_significant_digits() -> None:
    assert format_value(0.97123) == "0.971"
    assert format_value(1.2345) == "1.23"
    assert format_value(12.345) == "12.3"
    assert format_value(1234.5) == "1,234"


def test_text_table_lines_up_every_row() -> None:
    lines = format_text(ROWS).splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert "0.971 x" in lines[2] and "meets" in lines[2]
    assert "misses" in lines[3]
    assert lines[4].split()[-2:] == ["309", "MFLOP"]


def test_markdown_escapes_pipes_and_lists_the_environment() -> None:
    text = format_markdown(ROWS, {"size": "small", "machine": "2 cores"})
    assert text.startswith("# kubetrain benchmarks (small size)")
    assert "- machine: 2 cores" in text
    assert "peak RSS \\| 10x" in text
    assert sum(line.startswith("| ") for line in text.splitlines()) == 2 + len(ROWS)


def test_results_are_written_as_json_and_markdown(tmp_path: Path) -> None:
    json_path, markdown_path = write_results(tmp_path / "results", ROWS, {"size": "small"})
    document = json.loads(json_path.read_text())
    assert [row["value"] for row in document["rows"]] == [0.9712, 1.234, 308.9215]
    assert [row["verdict"] for row in document["rows"]] == ["meets", "misses", ""]
    assert "| 5 peak |" in markdown_path.read_text()
