"""The notebook's point, MixUp vs no MixUp, side by side: the two runs of `python -m cifar_mixup --compare` (same
seed, data and settings) read back from their folders into one table and one plot of both validation curves.

Pure file work, no TensorFlow: `write_comparison(directory)` after both runs, on rank 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VARIANTS = (("mixup", True), ("no-mixup", False))  # sub-folder of the checkpoint directory, --mixup or not


@dataclass(frozen=True)
class RunSummary:
    name: str
    epochs: list[dict[str, Any]]  # history.json's records
    held_out_accuracy: float | None  # evaluation.json, after the last epoch

    def best(self, metric: str = "val_accuracy") -> tuple[float, int]:
        """(best value, its epoch)."""
        value, epoch = max((record[metric], record["epoch"]) for record in self.epochs if metric in record)
        return value, epoch


def read_run(directory: str, name: str) -> RunSummary:
    with open(os.path.join(directory, name, "history.json"), encoding="utf-8") as handle:
        epochs = json.load(handle)["epochs"]
    evaluation_path = os.path.join(directory, name, "evaluation.json")
    accuracy = None
    if os.path.exists(evaluation_path):
        with open(evaluation_path, encoding="utf-8") as handle:
            accuracy = float(json.load(handle)["heldOutAccuracy"])
    return RunSummary(name, epochs, accuracy)


def format_table(runs: Sequence[RunSummary]) -> str:
    """Markdown: per run, best and final validation accuracy, final validation loss, held-out accuracy."""
    lines = ["| run | epochs | best val_accuracy (epoch) | final val_accuracy | final val_loss | held-out accuracy |",
             "| --- | --- | --- | --- | --- | --- |"]
    for run in runs:
        best, at = run.best()
        last = run.epochs[-1]
        held_out = "" if run.held_out_accuracy is None else f"{run.held_out_accuracy:.4f}"
        lines.append(f"| {run.name} | {last['epoch']} | {best:.4f} ({at}) | {last['val_accuracy']:.4f} | "
                     f"{last['val_loss']:.4f} | {held_out} |")
    return "\n".join(lines)


def plot_validation(runs: Sequence[RunSummary], path: str, title: str) -> None:
    """Validation accuracy (left) and loss (right) per epoch, one line per run; training accuracy dashed."""
    from trainlib.plots import plt, save_figure  # matplotlib only here: every rank imports this module

    figure, (accuracy_axis, loss_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        epochs = [record["epoch"] for record in run.epochs]
        line = accuracy_axis.plot(epochs, [r["val_accuracy"] for r in run.epochs], marker="o",
                                  label=f"{run.name} validation")[0]
        accuracy_axis.plot(epochs, [r["accuracy"] for r in run.epochs], linestyle="--", color=line.get_color(),
                           label=f"{run.name} training")
        loss_axis.plot(epochs, [r["val_loss"] for r in run.epochs], marker="o", color=line.get_color(),
                       label=f"{run.name} validation")
    for axis, label in ((accuracy_axis, "accuracy"), (loss_axis, "loss")):
        axis.set_xlabel("epoch")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend()
    save_figure(figure, path, title)


def write_comparison(directory: str, settings: Mapping[str, Any]) -> str:
    """comparison.md, comparison.json and comparison.png in `directory`; returns the table."""
    runs = [read_run(directory, name) for name, _ in VARIANTS]
    table = format_table(runs)
    described = ", ".join(f"{key} {value}" for key, value in settings.items())
    with open(os.path.join(directory, "comparison.md"), "w", encoding="utf-8") as handle:
        handle.write(f"# MixUp vs no MixUp\n\n{described}\n\n{table}\n")
    with open(os.path.join(directory, "comparison.json"), "w", encoding="utf-8") as handle:
        json.dump({"settings": dict(settings), "runs": [run.__dict__ for run in runs]}, handle, indent=2)
    plot_validation(runs, os.path.join(directory, "comparison.png"), f"MixUp vs no MixUp ({described})")
    return table
