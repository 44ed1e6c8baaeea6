"""What the tiers share when they run together.

`make test` runs the tiers after the unit tier in pytest-xdist workers with `--dist loadgroup --no-loadscope-reorder`.
Each test is put in the xdist group of its tier (the folder under tests/), so a tier runs whole in one worker and its
session fixtures (a control plane, the kind cluster) are made once. Tiers are handed out in TIER_ORDER, longest
first, so that the workers finish at about the same time.

The reliability figures are recorded in whichever process runs the reliability tier: a worker sends its own to the
controller, which prints and writes them once at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reliability.figures import FIGURES, RESULTS

TESTS = Path(__file__).resolve().parent
# Longest first (minutes in a warm serial run: controlplane 7.0, e2e 6.8, bench 6.5, reliability 6.2, images 5.6,
# jobs 4.8, launch 0.9, docs 0.4); a tier not listed runs last.
TIER_ORDER = ("controlplane", "e2e", "bench", "reliability", "images", "jobs", "launch", "docs", "unit")
FIGURES_KEY = "kubetrain_reliability_figures"


def tier_of(item: pytest.Item) -> str:
    return Path(item.path).resolve().relative_to(TESTS).parts[0]


def tier_rank(tier: str) -> int:
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group each test by its tier and put the tiers in TIER_ORDER (a stable sort: a tier keeps its own order)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(tier_of(item)))
    items.sort(key=lambda item: tier_rank(tier_of(item)))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand this worker's reliability figures to the controller."""
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is not None and not FIGURES.empty():
        output[FIGURES_KEY] = FIGURES.as_dict()


def pytest_testnodedown(node: Any, error: object | None) -> None:
    """In the xdist controller: add a finished worker's reliability figures."""
    figures = getattr(node, "workeroutput", {}).get(FIGURES_KEY)
    if figures:
        FIGURES.merge(figures)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES.empty() or hasattr(terminalreporter.config, "workeroutput"):
        return
    table = FIGURES.markdown()
    terminalreporter.write_sep("=", "kubetrain reliability figures")
    terminalreporter.write(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)
    terminalreporter.write_line(f"written to {RESULTS}")
