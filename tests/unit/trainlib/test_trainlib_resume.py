"""A fresh optimizer's slots exist before the first step (so a checkpoint can be restored into them), and making them
changes nothing: the first real step is the one a fresh optimizer would take. Under --mixed-precision the wrapped
optimizer's variables are the same ones, without a loss scale: a checkpoint is the same with or without the flag."""

from __future__ import annotations

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd_keras
import numpy as np
import pytest
import tensorflow as tf

from trainlib.resume import create_optimizer_slots

legacy = tf.keras.optimizers.legacy
OPTIMIZERS = {  # name: (a fresh optimizer, slots per variable, the slots' initial value)
    "adagrad": (lambda: legacy.Adagrad(0.1, initial_accumulator_value=0.1), 1, 0.1),
    "adam": (lambda: legacy.Adam(0.01), 2, 0.0),
    "sgd-momentum": (lambda: legacy.SGD(0.1, momentum=0.9), 1, 0.0),
    "adadelta": (lambda: legacy.Adadelta(1.0), 2, 0.0),
}
WRAPPERS = {  # Horovod is not initialised here: a collective would raise
    "plain": lambda optimizer: optimizer,
    "horovod.tensorflow.keras": hvd_keras.DistributedOptimizer,
    "horovod.tensorflow": hvd_tf.DistributedOptimizer,
    "mixed precision": lambda optimizer: tf.keras.mixed_precision.LossScaleOptimizer(
        hvd_keras.DistributedOptimizer(optimizer)),
}


def weights() -> list[tf.Variable]:
    return [tf.Variable([[1.0, -2.0], [3.0, 0.5]]), tf.Variable([0.25, -0.75])]


def assert_close(variables, others, rtol: float = 0.0) -> None:
    for variable, other in zip(variables, others, strict=True):
        np.testing.assert_allclose(variable.numpy(), other.numpy(), rtol=rtol, err_msg=variable.name)


def first_step(optimizer, variables) -> None:
    gradients = [tf.constant([[0.5, -1.0], [2.0, 0.1]]), tf.constant([-0.3, 0.7])]
    optimizer.apply_gradients(list(zip(gradients, variables, strict=True)))


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_slots_exist_before_the_first_step_and_change_nothing(name, wrapper):
    make, slots_per_variable, initial = OPTIMIZERS[name]
    prepared, prepared_weights = WRAPPERS[wrapper](make()), weights()
    create_optimizer_slots(prepared, prepared_weights)

    iterations, *slots = prepared.variables()
    assert iterations is prepared.iterations and int(iterations.numpy()) == 0
    assert len(slots) == slots_per_variable * len(prepared_weights)
    for slot in slots:
        np.testing.assert_array_equal(slot.numpy(), np.full(slot.shape, initial, np.float32), err_msg=slot.name)
    assert_close(prepared_weights, weights())

    fresh, fresh_weights = make(), weights()  # creates its slots in its first step
    first_step(prepared, prepared_weights)
    first_step(fresh, fresh_weights)
    assert_close(prepared_weights, fresh_weights, rtol=1e-6)
    assert_close(prepared.variables(), fresh.variables(), rtol=1e-6)


def test_under_a_strategy_the_slots_are_the_strategys_variables():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        variables = weights()
        optimizer = legacy.Adam(0.01)
        create_optimizer_slots(optimizer, variables)
    slots = optimizer.variables()[1:]
    assert len(slots) == 4
    assert all(isinstance(slot, tf.distribute.DistributedValues) for slot in slots)
    assert all(not slot.numpy().any() for slot in slots) and int(optimizer.iterations.numpy()) == 0
    assert_close(variables, weights())


def test_an_optimizer_that_has_stepped_is_refused():
    optimizer, variables = legacy.Adam(0.01), weights()
    first_step(optimizer, variables)
    with pytest.raises(ValueError, match="fresh optimizer; this one has taken 1 steps"):
        create_optimizer_slots(optimizer, variables)


def test_a_new_style_optimizer_is_refused():
    with pytest.raises(TypeError, match="tf.keras.optimizers.legacy"):
        create_optimizer_slots(tf.keras.optimizers.Adam(0.01), weights())
