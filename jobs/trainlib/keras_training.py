"""`fit_distributed`: the whole Horovod + Keras training run every Keras program shares.

Resume from rank 0's latest checkpoint, broadcast, then `model.fit` with the Horovod callbacks first and rank 0's
checkpoint, history and progress callbacks after them. The model must be compiled with
`distributed.distributed_optimizer(...)`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import tensorflow as tf

from trainlib.callbacks import CheckpointCallback, HistoryCallback, ProgressCallback
from trainlib.checkpoints import CheckpointManager
from trainlib.distributed import WorkerContext, horovod_callbacks
from trainlib.hdf5_input import RankInput
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter
from trainlib.resume import keras_state, restore_and_broadcast

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
    if context.is_chief and manager is not None:
        history = HistoryLog(checkpoint_dir, title)
        history.resume_at(initial_epoch)
        checkpoints = CheckpointCallback(manager, variables, rank=context.rank)
        callbacks += [checkpoints, HistoryCallback(history),
                      ProgressCallback(ProgressReporter.from_environment(), epochs, train.steps, checkpoints)]
    model.fit(train.dataset, steps_per_epoch=train.steps, epochs=epochs, initial_epoch=initial_epoch,
              validation_data=validation.dataset if validation else None,
              validation_steps=validation.steps if validation else None,
              callbacks=callbacks, verbose=2 if context.is_chief else 0)
    return initial_epoch
