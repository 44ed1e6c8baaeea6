"""Read Prometheus text exposition (the API server's and the operator's /metrics) and take deltas (pure)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


def parse(text: str) -> list[Sample]:
    """Every sample line; comments and blank lines are skipped, label values unescaped."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = {m["key"]: _unescape(m["value"]) for m in _LABEL.finditer(match["labels"] or "")}
        samples.append(Sample(match["name"], labels, float(match["value"])))
    return samples


def total(samples: list[Sample], name: str,
          where: Callable[[Mapping[str, str]], bool] = lambda labels: True) -> float:
    """Sum of the samples called `name` whose labels pass `where` (0 when there are none)."""
    values = [s.value for s in samples if s.name == name and where(s.labels)]
    return math.fsum(values)


def delta(before: list[Sample], after: list[Sample], name: str,
          where: Callable[[Mapping[str, str]], bool] = lambda labels: True) -> float:
    """How much a counter (summed over matching series) grew between two scrapes."""
    return total(after, name, where) - total(before, name, where)
