"""Elastic Horovod for Keras programs: training goes on when a rank fails or a host joins.

horovodrun runs a job elastically with `--min-np`/`--max-np` and a host discovery script, and sets HOROVOD_ELASTIC=1
in every rank (`cli.is_elastic`). `fit_elastic` then trains inside `hvd.elastic.run`:

1. Before the state is made, the optimizer's slots exist (made without a collective), and rank 0 restores the latest
   checkpoint. The first `state.sync()` gives every rank rank 0's weights, slots and position.
2. Every `commit_every_batches` batches and at each epoch's end, `CommitStateCallback` copies the state to memory and
   checks whether hosts joined or left.
3. When a rank fails, the others go back to the last commit. When hosts join or leave, all stop at the next commit.
   Horovod then re-forms the job, the reset callback rescales the learning rate to the new size, and the state is
   synced again. The training function runs again: it builds the inputs for the new (rank, size) and rank 0's
   callbacks (rank 0 may be another process now), trains the rest of the interrupted epoch, then the other epochs.

The position is kept by `PositionCallback`, not Horovod's `UpdateEpochStateCallback` and `UpdateBatchStateCallback`.
`fit` runs with `initial_epoch=state.epoch`, so Keras numbers epochs absolutely; Horovod's epoch callback adds its own
start epoch again. Its batch callback shortens the first epoch through `params["steps"]`, which Keras 2.15's loop does
not read. Here a separate `fit` call trains the rest of an interrupted epoch.

Commit cost, measured with 2 Gloo ranks on a 2-core CPU machine (median of 180): cifar_mixup's CNN on 8x8 digits,
batch 16: 13 ms a batch, 9 ms a commit; mnist's CNN, batch 32: 5 ms a batch, 5 ms a commit. Copying the weights takes
under 2 ms; the rest is the host-update check's broadcast. At 32x32x3 (batch 32) a batch takes 118 ms, a commit 9 ms.
Committing every 50 batches (`cli.DEFAULT_COMMIT_EVERY_BATCHES`) costs under 2% and loses at most 50 batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import horovod.tensorflow.keras as hvd
import tensorflow as tf

from trainlib import distributed
from trainlib.callbacks import BackgroundWriter, chief_callbacks
from trainlib.checkpoints import CheckpointManager
from trainlib.cli import DEFAULT_TENSORBOARD_EVERY_STEPS, setup_logging
from trainlib.distributed import WorkerContext
from trainlib.hdf5_input import RankInput
from trainlib.resume import keras_state, restore_latest

log = logging.getLogger(__name__)

T = TypeVar("T")
InputFactory = Callable[[WorkerContext], tuple[RankInput, RankInput | None]]


@dataclass(frozen=True)
class FitCall:
    """One `model.fit` call: epochs `initial_epoch`+1..`epochs` of `steps` steps; `steps_done` were taken before."""

    initial_epoch: int
    epochs: int
    steps: int
    steps_done: int


def steps_already_done(done: int, done_ranks: int, ranks: int, steps: int) -> int:
    """Steps of the current epoch already taken, counted at `ranks` ranks, when `done` were taken at `done_ranks`.

    A step takes one batch per rank, so the rows seen convert. At least one of the epoch's `steps` is left, so the
    epoch still ends (and is checkpointed).
    """
    return max(0, min(done * done_ranks // ranks, steps - 1))


def fit_calls(epoch: int, done: int, steps: int, epochs: int) -> list[FitCall]:
    """The `fit` calls that train from `done` steps into epoch `epoch` + 1 up to `epochs`: the rest of that epoch
    (when it began), then whole epochs."""
    if epoch >= epochs:
        return []
    if done == 0:
        return [FitCall(epoch, epochs, steps, 0)]
    rest = FitCall(epoch, epoch + 1, steps - done, done)
    return [rest] if epoch + 1 >= epochs else [rest, FitCall(epoch + 1, epochs, steps, 0)]


class PositionCallback(tf.keras.callbacks.Callback):
    """Keep `state.epoch` (epochs done), `state.batch` (steps done in the current epoch) and `state.ranks` (the ranks
    that took them) current, so that a commit records where training is. Put it before `CommitStateCallback`."""

    def __init__(self, state: Any, ranks: int, steps_done: int = 0) -> None:
        super().__init__()
        self.state = state
        self.ranks = ranks
        self.steps_done = steps_done

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.state.batch = self.steps_done + batch + 1  # Keras numbers a fit's batches from 0
        self.state.ranks = self.ranks

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.state.epoch = epoch + 1
        self.state.batch = 0
        self.steps_done = 0


class RescaleLearningRate:
    """Reset callback: the learning rate for the new number of ranks, `distributed.scaled_learning_rate`. During the
    warm-up, the warm-up callback sets it again from the next batch on."""

    def __init__(self, optimizer: tf.keras.optimizers.legacy.Optimizer, base: float,
                 size: Callable[[], int] = hvd.size) -> None:
        self.optimizer = optimizer
        self.base = base
        self.size = size

    def __call__(self) -> None:
        self.optimizer.learning_rate = distributed.scaled_learning_rate(self.base, self.size())


def run_elastic(train: Callable[[Any], T], state: Any) -> T:
    """`hvd.elastic.run(train)(state)`, except that an error Horovod would swallow still fails the run.

    Horovod 0.28's TensorFlow wrapper turns a `tf.errors.UnknownError` from a Horovod op into a rollback. It returns
    None for any other `UnknownError`, e.g. an exception in a `tf.data` generator, as if training had ended well.
    """
    swallowed: list[tf.errors.UnknownError] = []

    def attempt(state: Any) -> tuple[T]:
        swallowed.clear()
        try:
            return (train(state),)
        except tf.errors.UnknownError as error:
            swallowed.append(error)
            raise

    finished = hvd.elastic.run(attempt)(state)
    if finished is None:
        if swallowed:
            raise swallowed[-1]
        raise RuntimeError("elastic training returned no result")
    return finished[0]


def fit_elastic(model: tf.keras.Model, inputs: InputFactory, finish: Callable[[WorkerContext, RankInput | None], T],
                *, epochs: int, learning_rate: float, warmup_epochs: int, checkpoint_dir: str, keep_checkpoints: int,
                title: str, commit_every_batches: int, headline: str | None = None,
                tensorboard_every_steps: int = DEFAULT_TENSORBOARD_EVERY_STEPS,
                extra_callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> T:
    """Train from the latest checkpoint (or the last commit, after a reset) up to `epochs`, then return
    `finish(context, validation)`, which runs in the elastic function too (a held-out evaluation survives a reset).

    `inputs(context)` builds this rank's (train, validation) pipelines for the current rank and size. `learning_rate`
    is one rank's. The model must be compiled with `distributed.distributed_optimizer(...)`.
    """
    context = distributed.current_context()
    variables = keras_state(model)  # the optimizer's slots, made without a collective
    epoch = 0
    if context.is_chief:
        epoch = restore_latest(CheckpointManager(checkpoint_dir, keep_checkpoints), variables, context)
    state = hvd.elastic.KerasState(model, epoch=epoch, batch=0, ranks=context.size)
    state.register_reset_callbacks([RescaleLearningRate(model.optimizer, learning_rate)])

    def train(state: Any) -> T:
        context = distributed.current_context()
        setup_logging(context.rank)
        train_input, validation = inputs(context)
        done = steps_already_done(state.batch, state.ranks, context.size, train_input.steps)
        calls = fit_calls(state.epoch, done, train_input.steps, epochs)
        if context.is_chief:
            if calls:
                log.info("%d ranks train from epoch %d, step %d of %d", context.size,
                         state.epoch + 1, done, train_input.steps)
            else:
                log.info("%d of %d epochs are done: nothing to train", state.epoch, epochs)
        chief: list[tf.keras.callbacks.Callback] = []
        if context.is_chief:
            chief = chief_callbacks(context, CheckpointManager(checkpoint_dir, keep_checkpoints), variables, title,
                                    epochs, train_input.steps, state.epoch, headline, tensorboard_every_steps)
        common = distributed.horovod_callbacks(distributed.scaled_learning_rate(learning_rate, context.size),
                                               warmup_epochs, train_input.steps)
        commit = hvd.elastic.CommitStateCallback(state, batches_per_commit=commit_every_batches)
        try:
            for call in calls:
                position = PositionCallback(state, context.size, call.steps_done)
                model.fit(train_input.dataset, steps_per_epoch=call.steps, epochs=call.epochs,
                          initial_epoch=call.initial_epoch,
                          validation_data=validation.dataset if validation else None,
                          validation_steps=validation.steps if validation else None,
                          callbacks=[*common, position, *extra_callbacks, *chief, commit],
                          verbose=2 if context.is_chief else 0)
        finally:  # the next attempt's writer must not race this one's
            for callback in chief:
                if isinstance(callback, BackgroundWriter):
                    callback.flush()
        return finish(context, validation)

    return run_elastic(train, state)
