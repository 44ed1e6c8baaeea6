"""Keras callbacks for rank 0: checkpoint, history and progress after every epoch.

Give them to `model.fit` after `distributed.horovod_callbacks(...)` so the metrics they record are averaged over ranks.
Keras numbers epochs from 0; these callbacks record completed epochs (1-based), which is also the `initial_epoch` to
resume from.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import tensorflow as tf

from trainlib.checkpoints import Checkpoint, CheckpointManager
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter

log = logging.getLogger(__name__)


class CheckpointCallback(tf.keras.callbacks.Callback):
    """Save `variables` (see `resume.keras_state`) with the epoch's metrics after every epoch."""

    def __init__(self, manager: CheckpointManager, variables: Mapping[str, Sequence[tf.Variable]],
                 rank: int = 0) -> None:
        super().__init__()
        self.manager = manager
        self.variables = variables
        self.rank = rank
        self.last: Checkpoint | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        state = {group: [variable.numpy() for variable in group_vars] for group, group_vars in self.variables.items()}
        names = {group: [variable.name for variable in group_vars] for group, group_vars in self.variables.items()}
        self.last = self.manager.save(epoch + 1, state, logs or {}, names=names, rank=self.rank)
        log.info("saved checkpoint %s", self.last.path)


class HistoryCallback(tf.keras.callbacks.Callback):
    """Append the epoch's metrics to history.json and redraw history.png."""

    def __init__(self, history: HistoryLog) -> None:
        super().__init__()
        self.history = history

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.history.append(epoch + 1, logs or {})


class ProgressCallback(tf.keras.callbacks.Callback):
    """Report epoch, step, metrics and the newest checkpoint to the DistributedTraining status."""

    def __init__(self, reporter: ProgressReporter, epochs: int, steps_per_epoch: int,
                 checkpoints: CheckpointCallback | None = None) -> None:
        super().__init__()
        self.reporter = reporter
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.checkpoints = checkpoints

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        last = self.checkpoints.last if self.checkpoints else None
        self.reporter.report(epoch=epoch + 1, epochs=self.epochs, step=(epoch + 1) * self.steps_per_epoch,
                             metrics=logs or {}, checkpoint_path=last.path if last else None,
                             checkpoint_epoch=last.epoch if last else None)
