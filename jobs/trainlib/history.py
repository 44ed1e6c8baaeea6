"""`history.json` (one record of metrics per completed epoch) and its `history.png` curve, next to the checkpoints.

On resume the records of epochs after the restored checkpoint are dropped, so the file always describes the run that
produced the latest weights.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from trainlib.metrics import finite_metrics
from trainlib.plots import plot_history


class HistoryLog:
    """Per-epoch metrics of one training run, persisted after every epoch (rank 0 only)."""

    def __init__(self, directory: str, title: str) -> None:
        self.directory = directory
        self.title = title
        self.json_path = os.path.join(directory, "history.json")
        self.png_path = os.path.join(directory, "history.png")
        self.records: list[dict[str, float]] = []
        if os.path.exists(self.json_path):
            try:
                with open(self.json_path, encoding="utf-8") as handle:
                    self.records = list(json.load(handle)["epochs"])
            except (OSError, ValueError, KeyError, TypeError):
                self.records = []

    def resume_at(self, epochs_done: int) -> None:
        """Forget records of epochs after `epochs_done` (they belong to weights that were not checkpointed)."""
        self.records = [record for record in self.records if record.get("epoch", 0) <= epochs_done]

    def append(self, epoch: int, metrics: Mapping[str, object]) -> None:
        """Record completed epoch `epoch` (1-based), then rewrite history.json and history.png."""
        self.records = [record for record in self.records if record.get("epoch") != epoch]
        self.records.append({"epoch": epoch, **finite_metrics(metrics)})
        self.records.sort(key=lambda record: record["epoch"])
        self.write()

    def write(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        temporary = f"{self.json_path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"title": self.title, "epochs": self.records}, handle, indent=2)
        os.replace(temporary, self.json_path)
        if self.records:
            plot_history(self.records, self.png_path, self.title)
