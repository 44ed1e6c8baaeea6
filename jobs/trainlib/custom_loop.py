"""For programs with their own training loop (no `model.fit`): what the Keras callbacks give `fit` users.

- `warmup_learning_rate`, `warmup_fraction`: Horovod's warm-up (`LearningRateWarmupCallback`'s formula) as pure
  functions of progress.
- `loss_scaled`: the `LossScaleOptimizer` Keras `compile` gives `fit` under --mixed-precision.
- `EpochRecorder`: rank 0's end-of-epoch work in one call: checkpoint, `history.json`/`history.png`, TensorBoard's
  event files, status progress, written on a background thread (as the Keras programs' callbacks do) so the next
  epoch does not wait for them; and `after_step`, which every N steps hands TensorBoard the learning rate.

Typical loop::

    variables = {"model": model.weights, "optimizer": optimizer.variables()}
    recorder = EpochRecorder.for_rank(context, checkpoint_dir, keep, title, epochs, steps_per_epoch,
                                      tensorboard_every_steps=args.tensorboard_every_steps)
    start = restore_and_broadcast(context, recorder.manager if recorder else None, variables)
    if recorder:
        recorder.resume_at(start, model)     # also writes the model's graph to TensorBoard
    for epoch in range(start + 1, epochs + 1):   # 1-based, as checkpoints count completed epochs
        ... train (after every optimizer step: if recorder: recorder.after_step(optimizer)),
        ... evaluate, average metrics over ranks ...
        if recorder:
            recorder.record(epoch, metrics, variables)
    if recorder:
        recorder.finish()   # waits for the writes; raises a failed one
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from trainlib import startup
from trainlib.callbacks import PLOT_INTERVAL_SECONDS, BackgroundWriter, run_or_submit
from trainlib.checkpoints import Checkpoint, CheckpointManager
from trainlib.cli import DEFAULT_TENSORBOARD_EVERY_STEPS
from trainlib.distributed import WorkerContext
from trainlib.history import HistoryLog
from trainlib.precision import POLICY as MIXED_PRECISION_POLICY
from trainlib.progress import ProgressReporter
from trainlib.tensorboard import TensorBoardLog, current_learning_rate, graph_of, is_due

log = logging.getLogger(__name__)


def warmup_fraction(progress: float | tf.Tensor, size: int) -> float | tf.Tensor:
    """The share of the target rate after `progress` (0 to 1) of the warm-up: linear from 1/size to 1. Plain
    arithmetic, so it serves Python floats and tensors inside a Keras schedule alike."""
    return (progress * (size - 1) + 1.0) / size


def warmup_learning_rate(target: float, size: int, epochs_done: float, warmup_epochs: int) -> float:
    """Learning rate after `epochs_done` (fractional) epochs: ramps linearly from `target / size` to `target` over
    `warmup_epochs`, then stays at `target` (0 warm-up epochs: always `target`)."""
    if warmup_epochs <= 0 or epochs_done >= warmup_epochs:
        return target
    return target * warmup_fraction(epochs_done / warmup_epochs, size)


def loss_scaled(optimizer: tf.keras.optimizers.legacy.Optimizer) -> tf.keras.optimizers.legacy.Optimizer:
    """Under the mixed_float16 policy (--mixed-precision), `optimizer` wrapped in a `LossScaleOptimizer`, as Keras
    `compile` does for `fit`; under any other policy, `optimizer` itself. The wrapper's `minimize(loss, variables,
    tape=tape)` scales the loss, unscales the gradients and skips a step whose gradients overflowed.

    Wrap Horovod's `DistributedOptimizer`, never the reverse (Horovod cannot rebuild a `LossScaleOptimizer`:
    horovod/horovod#2989). The ranks then average the gradients of the scaled loss and unscale the average, so every
    rank sees the same overflow and skips the same step.
    """
    if tf.keras.mixed_precision.global_policy().name != MIXED_PRECISION_POLICY:
        return optimizer
    return tf.keras.mixed_precision.LossScaleOptimizer(optimizer)


class EpochRecorder:
    """Rank 0's checkpoint manager, history log, TensorBoard log and progress reporter, driven once per completed
    epoch (and `after_step` once per optimizer step).

    With a `writer`, `record` copies the variables and leaves the writing to the writer's thread (in order); without,
    it writes before returning. Call `finish` once training ends.
    """

    def __init__(self, manager: CheckpointManager, history: HistoryLog, reporter: ProgressReporter, epochs: int,
                 steps_per_epoch: int, rank: int = 0, writer: BackgroundWriter | None = None,
                 tensorboard: TensorBoardLog | None = None) -> None:
        self.manager = manager
        self.history = history
        self.reporter = reporter
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.rank = rank
        self.writer = writer
        self.tensorboard = tensorboard
        self.last: Checkpoint | None = None
        self.steps = 0  # optimizer steps taken, counted from the restored state

    @classmethod
    def for_rank(cls, context: WorkerContext, checkpoint_dir: str, keep: int, title: str, epochs: int,
                 steps_per_epoch: int, reporter: ProgressReporter | None = None, headline: str | None = None,
                 tensorboard_every_steps: int = DEFAULT_TENSORBOARD_EVERY_STEPS) -> EpochRecorder | None:
        """The recorder on rank 0, writing on a background thread; None on every other rank (they never touch the
        checkpoint directory)."""
        if not context.is_chief:
            return None
        return cls(CheckpointManager(checkpoint_dir, keep),
                   HistoryLog(checkpoint_dir, title, plot_interval=PLOT_INTERVAL_SECONDS),
                   reporter or ProgressReporter.from_environment(headline=headline), epochs, steps_per_epoch,
                   context.rank, BackgroundWriter(), TensorBoardLog(checkpoint_dir, tensorboard_every_steps))

    def resume_at(self, epochs_done: int, model: tf.keras.Model | None = None,
                  inputs: Sequence[tf.TensorSpec] | None = None) -> None:
        """Drop history records and TensorBoard events newer than the restored checkpoint (its steps are
        `epochs_done` whole epochs); with `model`, write its graph for `inputs` (default: its own) to TensorBoard
        (traced on the writer's thread). The records kept go on to the status's history with the next report."""
        self.history.resume_at(epochs_done)
        self.steps = epochs_done * self.steps_per_epoch
        tensorboard, steps = self.tensorboard, self.steps
        if tensorboard is None:
            return
        run_or_submit(self.writer, lambda: tensorboard.resume_at(epochs_done, steps))
        if model is not None:
            run_or_submit(self.writer, lambda: tensorboard.graph(graph_of(model, inputs)))

    def after_step(self, optimizer: tf.keras.optimizers.legacy.Optimizer) -> None:
        """Count an optimizer step (the first ends rank 0's startup, trainlib.startup); every
        `tensorboard.every_steps` steps read the learning rate now and hand it to TensorBoard."""
        self.steps += 1
        startup.first_step()
        tensorboard, step = self.tensorboard, self.steps
        if tensorboard is not None and is_due(step, tensorboard.every_steps):
            rate = current_learning_rate(optimizer)
            run_or_submit(self.writer, lambda: tensorboard.learning_rate(step, rate))

    def record(self, epoch: int, metrics: Mapping[str, float],
               variables: Mapping[str, Sequence[tf.Variable]]) -> None:
        """After completed epoch `epoch` (1-based): copy the variables now; append the history, save them and report
        progress on the writer's thread. Raises the failure of an earlier epoch's writes. The first epoch's end also
        ends the startup of a rank 0 that takes no steps of its own (a parameter server)."""
        startup.first_step()
        state = {group: [variable.numpy() for variable in group_vars] for group, group_vars in variables.items()}
        names = {group: [variable.name for variable in group_vars] for group, group_vars in variables.items()}
        metrics = dict(metrics)
        run_or_submit(self.writer, lambda: self._write(epoch, metrics, state, names))

    def _write(self, epoch: int, metrics: dict[str, float], state: dict[str, list[np.ndarray]],
               names: dict[str, list[str]]) -> None:
        self.history.append(epoch, metrics)  # first: a kill before the save only makes the resume train it again
        if self.tensorboard is not None:
            self.tensorboard.epoch(epoch, metrics)
        self.last = self.manager.save(epoch, state, metrics, names=names, rank=self.rank)
        log.info("epoch %d/%d: %s; saved %s", epoch, self.epochs,
                 ", ".join(f"{key} {float(value):.4g}" for key, value in metrics.items()), self.last.path)
        self.reporter.report(epoch=epoch, epochs=self.epochs, step=epoch * self.steps_per_epoch, metrics=metrics,
                             checkpoint_path=self.last.path, checkpoint_epoch=self.last.epoch,
                             history=self.history.records)

    def finish(self) -> Checkpoint | None:
        """Draw the history's last curve, wait for every write, raise the first failure; returns the newest
        checkpoint saved."""
        run_or_submit(self.writer, self.history.finish)
        if self.tensorboard is not None:
            run_or_submit(self.writer, self.tensorboard.close)
        if self.writer is not None:
            self.writer.flush()
        return self.last
