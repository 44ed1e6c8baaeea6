"""How the ranks' models are kept together, per trainer (the rules themselves are in higgs.elastic).

- single, allreduce: nothing to do between steps (allreduce averages gradients inside the optimizer).
- easgd: every `window` steps an elastic step between each rank's model and a centre model, one allreduce of the
  differences; the centre model is what is evaluated and checkpointed as the result.
- model-averaging: every `window` steps, and at the end of every epoch, the weights are replaced by their mean.
"""

from __future__ import annotations

import horovod.tensorflow as hvd
import tensorflow as tf

from higgs.elastic import elastic_update


class Synchronizer:
    """No synchronisation of weights; the model itself is the result."""

    def __init__(self, model: tf.keras.Model) -> None:
        self.model = model

    @property
    def result_model(self) -> tf.keras.Model:
        """The model to evaluate and report."""
        return self.model

    def extra_state(self) -> dict[str, list[tf.Variable]]:
        """Variables to checkpoint besides the model and optimizer."""
        return {}

    def compile(self) -> None:
        """Trace the synchronisation graph now, so that training time excludes it."""

    def after_step(self, step: int) -> None:
        """Called after optimizer step `step` (1-based, counted over the whole run)."""

    def end_of_epoch(self) -> None:
        """Called on every rank after the last step of an epoch."""


class WindowedSynchronizer(Synchronizer):
    """Runs `synchronize` (one traced graph) on every rank after every `window` optimizer steps."""

    def __init__(self, model: tf.keras.Model, window: int) -> None:
        super().__init__(model)
        self.window = window
        self._sync = tf.function(self.synchronize)

    def synchronize(self) -> None:
        """Bring the ranks' weights together (a collective: every rank calls it at the same step)."""
        raise NotImplementedError

    def compile(self) -> None:
        self._sync.get_concrete_function()

    def after_step(self, step: int) -> None:
        if step % self.window == 0:
            self._sync()


class ElasticAveraging(WindowedSynchronizer):
    """Synchronous EASGD with a communication window."""

    def __init__(self, model: tf.keras.Model, center: tf.keras.Model, window: int, alpha: float) -> None:
        super().__init__(model, window)
        self.center = center
        self.alpha = alpha
        self.center.set_weights(model.get_weights())

    @property
    def result_model(self) -> tf.keras.Model:
        return self.center

    def extra_state(self) -> dict[str, list[tf.Variable]]:
        return {"center": list(self.center.weights)}

    def synchronize(self) -> None:
        local = [variable.read_value() for variable in self.model.trainable_variables]
        center = [variable.read_value() for variable in self.center.trainable_variables]
        summed = hvd.grouped_allreduce([x - c for x, c in zip(local, center, strict=True)], op=hvd.Sum)
        for variable, center_variable, x, c, total in zip(self.model.trainable_variables,
                                                          self.center.trainable_variables, local, center, summed,
                                                          strict=True):
            new_local, new_center = elastic_update(x, c, total, self.alpha)
            variable.assign(new_local)
            center_variable.assign(new_center)


class ModelAveraging(WindowedSynchronizer):
    """Local steps, then every rank takes the mean of all ranks' weights."""

    def synchronize(self) -> None:
        values = [variable.read_value() for variable in self.model.trainable_variables]
        averaged = hvd.grouped_allreduce(values, op=hvd.Average)
        for variable, value in zip(self.model.trainable_variables, averaged, strict=True):
            variable.assign(value)

    def end_of_epoch(self) -> None:
        self._sync()  # every rank ends the epoch with the same weights, which rank 0 checkpoints
