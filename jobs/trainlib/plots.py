"""Training-curve plots (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def plot_history(records: Sequence[Mapping[str, float]], path: str, title: str) -> None:
    """Plot per-epoch metrics to `path`: losses on the left, other metrics on the right; `val_*` dashed.

    `records` are `{"epoch": n, "<metric>": value, ...}` dicts, one per epoch.
    """
    names = sorted({name for record in records for name in record if name not in ("epoch", "lr")})
    losses = [name for name in names if "loss" in name]
    others = [name for name in names if "loss" not in name]
    figure, axes = plt.subplots(1, 2 if others else 1, figsize=(11 if others else 6, 4), squeeze=False)
    for axis, group, label in ((axes[0][0], losses, "loss"), *(((axes[0][1], others, "metric"),) if others else ())):
        for name in group:
            points = [(record["epoch"], record[name]) for record in records if name in record]
            if points:
                epochs, values = zip(*points, strict=True)
                axis.plot(epochs, values, marker="o", linestyle="--" if name.startswith("val_") else "-", label=name)
        axis.set_xlabel("epoch")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        if group:
            axis.legend()
    save_figure(figure, path, title)


def save_figure(figure: matplotlib.figure.Figure, path: str, title: str | None = None) -> None:
    """Title, lay out and write `figure` to `path` (a PNG), then close it. Written to a temporary file and renamed, so
    a reader never sees half a PNG."""
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    temporary = f"{path}.{os.getpid()}.tmp.png"
    figure.savefig(temporary, dpi=100)
    plt.close(figure)
    os.replace(temporary, path)
