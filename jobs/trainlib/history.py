"""`history.json` (one record of metrics per completed epoch) and its `history.png` curve, next to the checkpoints.

On resume the records of epochs after the restored checkpoint are dropped, so the file always describes the run that
produced the latest weights.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping

from trainlib.metrics import finite_metrics


class HistoryLog:
    """Per-epoch metrics of one training run, persisted after every epoch (rank 0 only).

    history.json is rewritten after every epoch; history.png (a matplotlib drawing, far slower than the JSON) is
    redrawn when `plot_interval` seconds have passed since the last drawing (0: every epoch) and by `finish()`.
    """

    def __init__(self, directory: str, title: str, plot_interval: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.title = title
        self.plot_interval = plot_interval
        self._clock = clock
        self._plotted_at: float | None = None
        self._plotted_records: list[dict[str, float]] | None = None
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
        """Record completed epoch `epoch` (1-based), then rewrite history.json and, when due, history.png."""
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
        now = self._clock()
        if self._plotted_at is None or now - self._plotted_at >= self.plot_interval:
            self.plot()

    def finish(self) -> None:
        """Draw history.png if it does not show the newest records yet (call once training ends)."""
        if self._plotted_records != self.records:
            self.plot()

    def plot(self) -> None:
        if self.records:
            from trainlib.plots import plot_history  # matplotlib: rank 0 only, after its first epoch

            plot_history(self.records, self.png_path, self.title)
            self._plotted_records = list(self.records)
        self._plotted_at = self._clock()
