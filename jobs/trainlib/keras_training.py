"""The whole Keras training run every Keras program shares, resumed from the latest checkpoint, with the chief's
checkpoint, history and progress callbacks.

`fit_distributed` (Horovod): rank 0 restores and broadcasts; the Horovod callbacks run first; the model must be
compiled with `distributed.distributed_optimizer(...)`. `fit_with_strategy` (tf.distribute, e.g. Mirrored or
MultiWorkerMirrored): the strategy keeps replicas in sync, so every worker restores the same checkpoint itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import tensorflow as tf

from trainlib.callbacks import (
    PLOT_INTERVAL_SECONDS,
    REPORT_INTERVAL_SECONDS,
    BackgroundWriter,
    CheckpointCallback,
    HistoryCallback,
    ProgressCallback,
)
from trainlib.checkpoints import CheckpointManager
from trainlib.distributed import WorkerContext, horovod_callbacks
from trainlib.hdf5_input import RankInput
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter
from trainlib.resume import Variables, keras_state, restore_and_broadcast, restore_latest

log = logging.getLogger(__name__)


def fit_distributed(context: WorkerContext, model: tf.keras.Model, train: RankInput, validation: RankInput | None, *,
                    epochs: int, initial_lr: float, warmup_epochs: int, checkpoint_dir: str, keep_checkpoints: int,
                    title: str, extra_callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> int:
    """Train from the latest checkpoint up to `epochs`; returns the epoch training started from (0 = fresh).

    Only rank 0 touches `checkpoint_dir`. Validation (if given) runs on every rank over its own block of the held-out
    data; the reported `val_*` metrics are averaged over ranks.
    """
    manager = CheckpointManager(checkpoint_dir, keep_checkpoints) if context.is_chief else None
    variables = keras_state(model)
    initial_epoch = restore_and_broadcast(context, manager, variables)
    if initial_epoch >= epochs:
        if context.is_chief:
            log.info("the latest checkpoint already has %d of %d epochs: nothing to train", initial_epoch, epochs)
        return initial_epoch
    callbacks: list[tf.keras.callbacks.Callback] = horovod_callbacks(initial_lr, warmup_epochs, train.steps)
    callbacks.extend(extra_callbacks)
    if manager is not None:
        callbacks += chief_callbacks(context, manager, variables, title, epochs, train.steps, initial_epoch)
    _fit(context, model, train, validation, epochs, initial_epoch, callbacks)
    return initial_epoch


def fit_with_strategy(strategy: tf.distribute.Strategy, context: WorkerContext, model: tf.keras.Model,
                      train: RankInput, validation: RankInput | None, *, epochs: int, checkpoint_dir: str,
                      keep_checkpoints: int, title: str) -> int:  # fmt: skip
    """`fit_distributed` for a model compiled under `strategy.scope()`: every worker reads the latest checkpoint from
    the shared `checkpoint_dir`; the chief alone writes. Returns the epoch training started from."""
    manager = CheckpointManager(checkpoint_dir, keep_checkpoints)
    with strategy.scope():  # the optimizer's slots are created here: they must be the strategy's variables
        variables = keras_state(model)
    initial_epoch = restore_latest(manager, variables, context)
    if initial_epoch >= epochs:
        return initial_epoch
    callbacks = (chief_callbacks(context, manager, variables, title, epochs, train.steps, initial_epoch)
                 if context.is_chief else [])  # fmt: skip
    _fit(context, model, train, validation, epochs, initial_epoch, callbacks)
    return initial_epoch


def chief_callbacks(context: WorkerContext, manager: CheckpointManager, variables: Variables, title: str,
                    epochs: int, steps: int, initial_epoch: int) -> list[tf.keras.callbacks.Callback]:  # fmt: skip
    """Checkpoint after every epoch, then history (json; the plot by time), then progress in the job's status (by
    time), all written on one background thread so that training never waits for a disk or the API server."""
    history = HistoryLog(manager.directory, title, plot_interval=PLOT_INTERVAL_SECONDS)
    history.resume_at(initial_epoch)
    writer = BackgroundWriter()
    checkpoints = CheckpointCallback(manager, variables, rank=context.rank, writer=writer)
    return [checkpoints, HistoryCallback(history, writer),
            ProgressCallback(ProgressReporter.from_environment(), epochs, steps, checkpoints, writer,
                             report_interval=REPORT_INTERVAL_SECONDS),
            writer]


def _fit(context: WorkerContext, model: tf.keras.Model, train: RankInput, validation: RankInput | None, epochs: int,
         initial_epoch: int, callbacks: list[tf.keras.callbacks.Callback]) -> None:  # fmt: skip
    model.fit(train.dataset, steps_per_epoch=train.steps, epochs=epochs, initial_epoch=initial_epoch,
              validation_data=validation.dataset if validation else None,
              validation_steps=validation.steps if validation else None,
              callbacks=callbacks, verbose=2 if context.is_chief else 0)
