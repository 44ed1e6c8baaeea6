"""The whole Keras training run every Keras program shares, resumed from the latest checkpoint, with the chief's
checkpoint, history, TensorBoard and progress callbacks.

`fit_distributed` (Horovod): rank 0 restores and broadcasts; the Horovod callbacks run first; the model must be
compiled with `distributed.distributed_optimizer(...)`. Under elastic Horovod it hands over to `elastic.fit_elastic`.
Either way it ends with the held-out evaluation. `fit_with_strategy` (tf.distribute, e.g. Mirrored or
MultiWorkerMirrored): the strategy keeps replicas in sync, so every worker restores the same checkpoint itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

from trainlib import distributed
from trainlib.callbacks import chief_callbacks
from trainlib.checkpoints import CheckpointManager
from trainlib.cli import DEFAULT_COMMIT_EVERY_BATCHES, DEFAULT_TENSORBOARD_EVERY_STEPS, is_elastic
from trainlib.distributed import WorkerContext, horovod_callbacks
from trainlib.elastic import InputFactory, fit_elastic
from trainlib.hdf5_input import RankInput
from trainlib.resume import keras_state, restore_and_broadcast, restore_latest

__all__ = ["InputFactory", "Trained", "chief_callbacks", "evaluate_held_out", "fit_distributed", "fit_with_strategy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trained:
    """How a run ended on this process: its place in the job then (elastic runs change it), and the held-out metrics
    averaged over ranks (None without held-out input) over `held_out_rows` rows of all ranks."""

    context: WorkerContext
    held_out: dict[str, float] | None
    held_out_rows: int


def evaluate_held_out(context: WorkerContext, model: tf.keras.Model, validation: RankInput | None) -> Trained:
    """Evaluate `model` on every rank's block of the held-out data, averaged over ranks (every rank must call this)."""
    if validation is None:
        return Trained(context, None, 0)
    results = model.evaluate(validation.dataset, steps=validation.steps, verbose=0, return_dict=True)
    names = list(results)  # loss, then the compiled metrics: the same order on every rank
    means = distributed.allreduce_mean([results[name] for name in names], name="held_out_evaluation")
    return Trained(context, {name: float(mean) for name, mean in zip(names, means, strict=True)},
                   validation.rows * context.size)


def fit_distributed(context: WorkerContext, model: tf.keras.Model, inputs: InputFactory, *, epochs: int,
                    learning_rate: float, warmup_epochs: int, checkpoint_dir: str, keep_checkpoints: int, title: str,
                    commit_every_batches: int = DEFAULT_COMMIT_EVERY_BATCHES, headline: str | None = None,
                    tensorboard_every_steps: int = DEFAULT_TENSORBOARD_EVERY_STEPS,
                    extra_callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> Trained:
    """Train from the latest checkpoint up to `epochs`, then evaluate on the held-out input.

    `inputs(context)` builds this rank's (train, validation) pipelines. `learning_rate` is one rank's; the model is
    compiled at `distributed.scaled_learning_rate(learning_rate, context.size)`. Only rank 0 touches
    `checkpoint_dir`. Validation (if given) runs on every rank over its own block of the held-out data; the reported
    `val_*` metrics are averaged over ranks. Elastic runs (`cli.is_elastic()`) commit every
    `commit_every_batches` batches, see `elastic.fit_elastic`. `headline` names the metric the job's status shows.
    Rank 0 writes the learning rate to TensorBoard every `tensorboard_every_steps` steps (`trainlib.tensorboard`).
    """
    if is_elastic():
        return fit_elastic(model, inputs, lambda now, validation: evaluate_held_out(now, model, validation),
                           epochs=epochs, learning_rate=learning_rate, warmup_epochs=warmup_epochs,
                           checkpoint_dir=checkpoint_dir, keep_checkpoints=keep_checkpoints, title=title,
                           commit_every_batches=commit_every_batches, headline=headline,
                           tensorboard_every_steps=tensorboard_every_steps, extra_callbacks=extra_callbacks)
    train, validation = inputs(context)
    manager = CheckpointManager(checkpoint_dir, keep_checkpoints) if context.is_chief else None
    variables = keras_state(model)
    initial_epoch = restore_and_broadcast(context, manager, variables)
    if initial_epoch >= epochs:
        if context.is_chief:
            log.info("the latest checkpoint already has %d of %d epochs: nothing to train", initial_epoch, epochs)
        return evaluate_held_out(context, model, validation)
    initial_lr = distributed.scaled_learning_rate(learning_rate, context.size)
    callbacks: list[tf.keras.callbacks.Callback] = horovod_callbacks(initial_lr, warmup_epochs, train.steps)
    callbacks.extend(extra_callbacks)
    if manager is not None:
        callbacks += chief_callbacks(context, manager, variables, title, epochs, train.steps, initial_epoch, headline,
                                     tensorboard_every_steps)
    _fit(context, model, train, validation, epochs, initial_epoch, callbacks)
    return evaluate_held_out(context, model, validation)


def fit_with_strategy(strategy: tf.distribute.Strategy, context: WorkerContext, model: tf.keras.Model,
                      train: RankInput, validation: RankInput | None, *, epochs: int, checkpoint_dir: str,
                      keep_checkpoints: int, title: str, headline: str | None = None,
                      tensorboard_every_steps: int = DEFAULT_TENSORBOARD_EVERY_STEPS) -> int:
    """`fit_distributed` for a model compiled under `strategy.scope()`: every worker reads the latest checkpoint from
    the shared `checkpoint_dir`; the chief alone writes. Returns the epoch training started from."""
    manager = CheckpointManager(checkpoint_dir, keep_checkpoints)
    with strategy.scope():  # the optimizer's slots are created here: they must be the strategy's variables
        variables = keras_state(model)
    initial_epoch = restore_latest(manager, variables, context)
    if initial_epoch >= epochs:
        return initial_epoch
    callbacks = (chief_callbacks(context, manager, variables, title, epochs, train.steps, initial_epoch, headline,
                                 tensorboard_every_steps) if context.is_chief else [])
    _fit(context, model, train, validation, epochs, initial_epoch, callbacks)
    return initial_epoch


def _fit(context: WorkerContext, model: tf.keras.Model, train: RankInput, validation: RankInput | None, epochs: int,
         initial_epoch: int, callbacks: list[tf.keras.callbacks.Callback]) -> None:
    model.fit(train.dataset, steps_per_epoch=train.steps, epochs=epochs, initial_epoch=initial_epoch,
              validation_data=validation.dataset if validation else None,
              validation_steps=validation.steps if validation else None,
              callbacks=callbacks, verbose=2 if context.is_chief else 0)
