"""What a training rank does per step and between steps, for the trainers in which every rank trains together.

- single, allreduce: the optimizer's step only (allreduce averages the gradients inside Horovod's optimizer).
- easgd: every `window` steps (dist-keras: every step) the step is followed by the elastic exchange with the centre
  (one allreduce of the workers' distances, mean form; higgs.rules); the centre is what is evaluated and checkpointed.
- model-averaging: every `window` steps, and at the end of every epoch, the weights become their mean over ranks.

The parameter-server trainers' workers (higgs.asynchronous) build on `LocalTraining` too.
"""

from __future__ import annotations

from collections.abc import Callable

import horovod.tensorflow as hvd
import tensorflow as tf

from higgs.rules import easgd_center, easgd_worker, elastic_alpha
from higgs.trainers import TrainerSettings
from trainlib.custom_loop import warmup_learning_rate
from trainlib.hdf5_input import RankInput


class LocalTraining:
    """A rank's optimizer steps over its block of the data; no synchronisation of weights."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer
        self._loss = tf.keras.losses.CategoricalCrossentropy()
        self._step = tf.function(self.train_step)
        self.on_step: Callable[[], None] | None = None  # rank 0's TensorBoard learning rate, after every step

    @property
    def result_model(self) -> tf.keras.Model:
        """The model to evaluate and report."""
        return self.model

    def extra_state(self) -> dict[str, list[tf.Variable]]:
        """Variables to checkpoint besides the model and optimizer."""
        return {}

    def train_step(self, features: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """One step of the worker's optimizer (traced)."""
        with tf.GradientTape() as tape:
            loss = self._loss(targets, self.model(features, training=True))
        self.optimizer.minimize(loss, self.model.trainable_variables, tape=tape)
        return loss

    def compile(self, element_spec: tuple[tf.TensorSpec, tf.TensorSpec]) -> None:
        """Trace the graphs now, so that training time excludes tracing."""
        self._step.get_concrete_function(*element_spec)

    def begin(self) -> None:
        """Called once before the first epoch, after the weights are restored and broadcast."""

    def after_step(self, step: int) -> None:
        """Called after optimizer step `step` (1-based, counted over the whole run)."""

    def end_of_epoch(self) -> None:
        """Called after the last step of an epoch."""

    def step_function(self, steps_per_epoch: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
        """The traced step to run next."""
        return self._step

    def run_epoch(self, train: RankInput) -> tuple[float, int]:
        """One pass over this rank's block: (summed loss, steps)."""
        loss_sum = 0.0
        for features, targets in train.dataset.take(train.steps):
            loss_sum += float(self.step_function(train.steps)(features, targets))
            self.after_step(int(self.optimizer.iterations.numpy()))
            if self.on_step is not None:
                self.on_step()
        self.end_of_epoch()
        return loss_sum, train.steps


class WarmedUpTraining(LocalTraining):
    """The allreduce trainer's steps with Horovod's learning-rate warm-up from the one-rank rate to the scaled one
    (only it scales its rate by the ranks, so only it warms up)."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer, size: int,
                 warmup_epochs: int) -> None:
        super().__init__(model, optimizer)
        self.size, self.warmup_epochs = size, warmup_epochs
        self.target_rate = float(optimizer.learning_rate.numpy())

    def step_function(self, steps_per_epoch: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
        done = int(self.optimizer.iterations.numpy()) / steps_per_epoch
        self.optimizer.learning_rate = warmup_learning_rate(self.target_rate, self.size, done, self.warmup_epochs)
        return self._step


class WindowedAveraging(LocalTraining):
    """Model averaging: local steps, then every rank takes the mean of all ranks' weights."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer, window: int) -> None:
        super().__init__(model, optimizer)
        self.window = window
        self._average = tf.function(self.average)

    def average(self) -> None:
        """Every rank's trainable weights become their mean (a collective)."""
        values = [variable.read_value() for variable in self.model.trainable_variables]
        for variable, value in zip(self.model.trainable_variables, hvd.grouped_allreduce(values, op=hvd.Average),
                                   strict=True):
            variable.assign(value)

    def compile(self, element_spec: tuple[tf.TensorSpec, tf.TensorSpec]) -> None:
        super().compile(element_spec)
        self._average.get_concrete_function()

    def after_step(self, step: int) -> None:
        if step % self.window == 0:
            self._average()

    def end_of_epoch(self) -> None:
        self._average()  # every rank ends the epoch with the same weights, which rank 0 checkpoints


class ElasticAveraging(LocalTraining):
    """Synchronous EASGD: every `window`-th step is followed by the elastic exchange with the centre model."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer, center: tf.keras.Model,
                 settings: TrainerSettings) -> None:
        super().__init__(model, optimizer)
        self.center, self.window, self.learning_rate = center, settings.window, settings.learning_rate
        self.alpha = elastic_alpha(settings.learning_rate, settings.rho)
        self._elastic_step = tf.function(self.elastic_step)
        self.center.set_weights(model.get_weights())  # rank 0's, or its checkpoint's, once restored and broadcast

    @property
    def result_model(self) -> tf.keras.Model:
        return self.center

    def extra_state(self) -> dict[str, list[tf.Variable]]:
        return {"center": list(self.center.weights)}

    def elastic_step(self, features: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        """The optimizer's step, then the exchange: one allreduce of (weights after the step - centre)."""
        variables, centre = self.model.trainable_variables, self.center.trainable_variables
        before = [variable.read_value() for variable in variables]
        loss = self.train_step(features, targets)
        after = [variable.read_value() for variable in variables]
        distances = hvd.grouped_allreduce([x - c for x, c in zip(after, centre, strict=True)], op=hvd.Average)
        for variable, c_variable, x0, x1, distance in zip(variables, centre, before, after, distances, strict=True):
            c = c_variable.read_value()
            variable.assign(easgd_worker(x0, x1 - x0, c, self.learning_rate, self.alpha))
            c_variable.assign(easgd_center(c, distance, self.alpha))
        return loss

    def compile(self, element_spec: tuple[tf.TensorSpec, tf.TensorSpec]) -> None:
        super().compile(element_spec)
        self._elastic_step.get_concrete_function(*element_spec)

    def step_function(self, steps_per_epoch: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
        exchange = (int(self.optimizer.iterations.numpy()) + 1) % self.window == 0
        return self._elastic_step if exchange else self._step
