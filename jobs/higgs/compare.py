"""The trainer comparison: `python -m higgs.compare [flags]` is `python -m higgs --compare [flags]`.

Rank 0 prints a table of test F1 and training time per trainer and saves `compare.json` and `compare.png` (the
notebook's two bar charts: F1, higher is better; training time, lower is better) in the checkpoint directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from higgs.train import TrainerResult


def format_table(results: Sequence[TrainerResult]) -> str:
    """A fixed-width text table, one trainer per row."""
    header = f"{'trainer':<16} {'ranks':>5} {'F1':>7} {'F1(s)':>7} {'accuracy':>8} {'seconds':>8}"
    rows = [f"{r.trainer:<16} {r.ranks:>5} {r.f1:>7.4f} {r.f1_signal:>7.4f} {r.accuracy:>8.4f} {r.seconds:>8.1f}"
            for r in results]
    return "\n".join([header, "-" * len(header), *rows])


def plot_comparison(results: Sequence[TrainerResult], path: str) -> None:
    """Two bar charts side by side: F1 per trainer and training seconds per trainer."""
    from trainlib.plots import plt, save_figure  # pyplot on the Agg backend (no display)

    names = [result.trainer for result in results]
    positions = range(len(results))
    figure, (f1_axes, time_axes) = plt.subplots(1, 2, figsize=(10, 4))
    f1_axes.bar(positions, [result.f1 for result in results], 0.4, align="center", color="b")
    f1_axes.set(xlabel="Trainers", ylabel="F1", title="F1 score with different trainers (higher is better)")
    time_axes.bar(positions, [result.seconds for result in results], 0.4, align="center", color="b")
    time_axes.set(xlabel="Trainers", ylabel="Seconds", title="Training time (lower is better)")
    for axes in (f1_axes, time_axes):
        axes.set_xticks(list(positions), names, rotation=25)
    save_figure(figure, path)


def report_comparison(results: Sequence[TrainerResult], directory: str) -> str:
    """Print the table, write compare.json and compare.png; returns the table."""
    table = format_table(results)
    print(table, flush=True)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "compare.json"), "w", encoding="utf-8") as handle:
        json.dump([asdict(result) for result in results], handle, indent=2)
    plot_comparison(results, os.path.join(directory, "compare.png"))
    return table


def main(argv: Sequence[str] | None = None) -> int:
    from higgs.train import main as train_main

    return train_main(["--compare", *(argv or [])])


if __name__ == "__main__":
    import sys

    from trainlib.cli import quiet_tensorflow, run_main

    quiet_tensorflow()
    raise SystemExit(run_main(main, "higgs.compare", sys.argv[1:]))
