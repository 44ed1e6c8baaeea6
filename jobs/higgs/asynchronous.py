"""The parameter-server trainers (the notebook's asynchronous EASGD and EAMSGD, and DOWNPOUR), as dist-keras ran them.

Rank 0 is the parameter server (higgs.parameter_server): it holds the centre, which is what is evaluated and
checkpointed. Every other rank trains on its own block of the data with its own optimizer and, every `window` of its
own steps, exchanges with the server without waiting for the other workers (rules in higgs.rules):
- asynchronous EASGD: fetch the centre, send E = alpha (x - c), continue from x - E;
- asynchronous EAMSGD: the same exchange, with Nesterov momentum around the optimizer's steps in between;
- DOWNPOUR: send the sum of the steps since the last exchange, continue from the centre fetched after it.
After the last step of an epoch a worker exchanges once more (dist-keras dropped that partial window), then says it is
done; the server serves until every worker is.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from higgs import parameter_server
from higgs.rules import elastic_alpha, elastic_difference, look_ahead, momentum_velocity
from higgs.sync import LocalTraining
from higgs.trainers import TrainerSettings

log = logging.getLogger("higgs")


def weights_vector(model: tf.keras.Model) -> np.ndarray:
    """A model's trainable weights as one vector."""
    return parameter_server.flatten([variable.numpy() for variable in model.trainable_variables])


def set_weights_vector(model: tf.keras.Model, vector: np.ndarray) -> None:
    """The inverse of `weights_vector`."""
    variables = model.trainable_variables
    for variable, array in zip(variables, parameter_server.unflatten(vector, [tuple(v.shape) for v in variables]),
                               strict=True):
        variable.assign(array)


class AsyncWorker(LocalTraining):
    """A worker rank: local steps, and every `window` steps an exchange with the parameter server."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
                 settings: TrainerSettings, client: parameter_server.Client) -> None:
        super().__init__(model, optimizer)
        self.settings, self.client = settings, client
        self._since_exchange = 0

    def exchange(self) -> None:
        """One exchange with the parameter server."""
        raise NotImplementedError

    def after_step(self, step: int) -> None:
        self._since_exchange += 1
        if self._since_exchange == self.settings.window:
            self.exchange()
            self._since_exchange = 0

    def end_of_epoch(self) -> None:
        if self._since_exchange:
            self.exchange()
            self._since_exchange = 0
        self.client.done()


class ElasticWorker(AsyncWorker):
    """Asynchronous EASGD."""

    def exchange(self) -> None:
        local = weights_vector(self.model)
        difference = elastic_difference(local, self.client.pull(), elastic_alpha(self.settings.learning_rate,
                                                                                 self.settings.rho))
        set_weights_vector(self.model, local - difference)
        self.client.push(difference)


class MomentumElasticWorker(ElasticWorker):
    """Asynchronous EAMSGD: ElasticWorker's exchanges, Nesterov momentum around each optimizer step."""

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
                 settings: TrainerSettings, client: parameter_server.Client) -> None:
        self.velocity = [tf.Variable(tf.zeros_like(variable), trainable=False)
                         for variable in model.trainable_variables]
        super().__init__(model, optimizer, settings, client)

    def train_step(self, features: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
        momentum, rate = self.settings.momentum, self.settings.learning_rate
        variables = self.model.trainable_variables
        before = [variable.read_value() for variable in variables]
        for variable, x, v in zip(variables, before, self.velocity, strict=True):
            variable.assign(look_ahead(x, v, momentum))
        loss = super().train_step(features, targets)
        for variable, x, v in zip(variables, before, self.velocity, strict=True):
            ahead = look_ahead(x, v, momentum)
            v.assign(momentum_velocity(v, variable - ahead, momentum, rate))
            variable.assign(x + v)
        return loss


class DownpourWorker(AsyncWorker):
    """DOWNPOUR: the steps since the last exchange go to the server; the worker continues from the centre."""

    def begin(self) -> None:
        self._origin = weights_vector(self.model)

    def exchange(self) -> None:
        self.client.push(weights_vector(self.model) - self._origin)
        self._origin = self.client.pull().copy()
        set_weights_vector(self.model, self._origin)


WORKERS = {"async-easgd": ElasticWorker, "async-eamsgd": MomentumElasticWorker, "downpour": DownpourWorker}


class ParameterServer:
    """Rank 0 of a parameter-server trainer: serves the centre during each epoch; `model` holds it between epochs."""

    def __init__(self, model: tf.keras.Model, comm, workers: int) -> None:
        self.model, self.comm, self.workers = model, comm, workers

    @property
    def result_model(self) -> tf.keras.Model:
        return self.model

    def run_epoch(self) -> tuple[float, int]:
        """Serve until every worker has finished the epoch, then put the centre into the model. It trains on
        nothing: (0 loss, 0 steps)."""
        centre = weights_vector(self.model)
        stats = parameter_server.serve(self.comm, centre, self.workers)
        log.info("parameter server: %d updates and %d fetches from %d workers", stats.pushes, stats.pulls,
                 self.workers)
        set_weights_vector(self.model, centre)
        return 0.0, 0
