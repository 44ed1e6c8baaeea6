"""What the tiers share when they run together.

`make test` runs the tiers after the unit tier in pytest-xdist workers with `--dist loadgroup --no-loadscope-reorder`.
Each test is put in the xdist group of its tier (the folder under tests/), so a tier runs whole in one worker and its
session fixtures (a control plane, the kind cluster) are made once. Tiers are handed out in TIER_ORDER, longest
first. A filler tier (FILLER_TIERS: its modules share nothing costly) is one group per module instead, handed out
after the whole tiers: its modules go to whichever worker is free first, so that the workers finish at about the same
time.

At the end the run prints each tier's minutes and which worker ran which tiers; a tier other than a filler whose
tests ran in two workers fails the run (its session fixtures were made twice, or clashed). The reliability figures
are recorded in whichever process runs the reliability tier: a worker sends its own to the controller, which prints
and writes them once.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.figures import FIGURES, RESULTS

TESTS = Path(__file__).resolve().parent
# Longest first (minutes in the warm 3-lane run of 2026-11-29: jobs 17.3, controlplane 14.4, e2e 13.7, images 12.4,
# reliability 7.4, bench 5.0, launch 3.3, docs 1.7); a tier not listed runs last.
TIER_ORDER = ("jobs", "e2e", "controlplane", "images", "reliability", "bench", "launch", "docs", "unit")
# The jobs tier's modules each train on their own (their data sets are a few seconds to write).
FILLER_TIERS = ("jobs",)
FIGURES_KEY = "kubetrain_reliability_figures"
LANE_KEY = "kubetrain_lane"

LANES: dict[str, dict[str, float]] = {}  # in the xdist controller: worker id -> seconds of each tier it ran
SECONDS: dict[str, float] = defaultdict(float)  # tier -> seconds of its tests run or reported in this process
SPLIT: dict[str, list[str]] = {}  # in the xdist controller: a tier that ran in more than one worker -> those workers


def tier_of(item: pytest.Item) -> str:
    return Path(item.path).resolve().relative_to(TESTS).parts[0]


def group_of(item: pytest.Item) -> str:
    """The xdist group: the tier, or for a filler tier the tier and the module."""
    tier = tier_of(item)
    return f"{tier}/{Path(item.path).stem}" if tier in FILLER_TIERS else tier


def tier_rank(tier: str) -> tuple[bool, int]:
    """Whole tiers in TIER_ORDER (a tier not listed after them), then the filler tiers."""
    return tier in FILLER_TIERS, TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group each test (`group_of`) and put the tiers in order (a stable sort: a tier keeps its own order)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=lambda item: tier_rank(tier_of(item)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SECONDS[Path(report.fspath).parts[1]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand the tiers it ran and its reliability figures to the controller. In the controller:
    fail the run when a tier was split between workers."""
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[LANE_KEY] = [os.environ.get("PYTEST_XDIST_WORKER", "worker"), dict(SECONDS)]
        if not FIGURES.empty():
            output[FIGURES_KEY] = FIGURES.as_dict()
        return
    if session.config.getoption("dist", "no") == "loadgroup":
        SPLIT.update(split_tiers(LANES))
    if SPLIT:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_testnodedown(node: Any, error: object | None) -> None:
    """In the xdist controller: note which tiers a finished worker ran, and add its reliability figures."""
    output = getattr(node, "workeroutput", {})
    if LANE_KEY in output:
        worker, tiers = output[LANE_KEY]
        LANES[worker] = tiers
    if output.get(FIGURES_KEY):
        FIGURES.merge(output[FIGURES_KEY])


def split_tiers(lanes: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """Each tier but a filler that more than one worker ran, with those workers."""
    workers: dict[str, list[str]] = defaultdict(list)
    for worker, tiers in sorted(lanes.items()):
        for tier in tiers:
            if tier not in FILLER_TIERS:
                workers[tier].append(worker)
    return {tier: found for tier, found in workers.items() if len(found) > 1}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workeroutput"):
        return
    if SECONDS:
        terminalreporter.write_sep("=", "kubetrain tiers (minutes of their tests)")
        for worker, tiers in sorted(LANES.items()):
            minutes = ", ".join(f"{tier} {seconds / 60:.1f}" for tier, seconds in sorted(tiers.items()))
            terminalreporter.write_line(f"{worker}: {minutes}; {sum(tiers.values()) / 60:.1f} in all")
        if not LANES:
            terminalreporter.write_line(", ".join(f"{tier} {seconds / 60:.1f}" for tier, seconds in SECONDS.items()))
        for tier, workers in SPLIT.items():
            terminalreporter.write_line(f"FAILED: the {tier} tier ran in {' and '.join(workers)}; each tier must run "
                                        "whole in one worker (its xdist_group, tests/conftest.py)", red=True)
    if FIGURES.empty():
        return
    table = FIGURES.markdown()
    terminalreporter.write_sep("=", "kubetrain reliability figures")
    terminalreporter.write(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)
    terminalreporter.write_line(f"written to {RESULTS}")
