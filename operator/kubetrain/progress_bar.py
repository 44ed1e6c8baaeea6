"""The bar `kubetrain status --watch` shows on a terminal: epochs done, the headline metric and an ETA (rich).

The lines of the changes print above the bar, as in a pipe. The bar goes when the job finishes.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from kubetrain.follow import Snapshot

# Epochs take minutes: the ETA is the pace over every epoch seen since the watch (or the last restart) began.
PACE_WINDOW_SECONDS = 7 * 24 * 3600.0


class EpochBar:
    """A rich progress bar of a job's epochs; `show` moves it and prints a change's line above it."""

    def __init__(self, first: Snapshot, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("epochs"),
            TextColumn("{task.fields[metric]}", markup=False),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            speed_estimate_period=PACE_WINDOW_SECONDS,
            transient=True,
        )
        self.task = self.progress.add_task(first.phase, total=first.epochs, completed=first.epoch or 0,
                                           metric=first.metric or "")
        self.restarts = first.restarts

    def __enter__(self) -> EpochBar:
        self.progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.progress.stop()

    def show(self, snap: Snapshot, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)  # the terminal wraps it
        if snap.restarts != self.restarts:  # a new attempt: its pace starts again from its first epoch
            self.restarts = snap.restarts
            self.progress.reset(self.task, total=snap.epochs, completed=snap.epoch or 0, description=snap.phase,
                                metric=snap.metric or "")
            return
        self.progress.update(self.task, total=snap.epochs, completed=snap.epoch or 0, description=snap.phase,
                             metric=snap.metric or "")
