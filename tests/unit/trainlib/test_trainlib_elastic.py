"""Elastic Horovod's pure pieces and their wiring: where training resumes after a resize, the learning rate after a
reset, the position a commit records, the commit flag, and that a program's own error still fails an elastic run."""

from __future__ import annotations

import argparse

import horovod.tensorflow.keras as hvd
import numpy as np
import pytest
import tensorflow as tf

from cifar_mixup.cli import build_parser as cifar_mixup_parser
from mnist.cli import build_parser as mnist_parser
from trainlib.cli import DEFAULT_COMMIT_EVERY_BATCHES, add_elastic_arguments, is_elastic
from trainlib.distributed import distributed_optimizer
from trainlib.elastic import FitCall, PositionCallback, RescaleLearningRate, fit_calls, run_elastic, steps_already_done
from trainlib.resume import create_optimizer_slots


@pytest.mark.parametrize(("environ", "expected"), [
    ({"HOROVOD_ELASTIC": "1"}, True),  # what horovodrun sets with --min-np/--max-np
    ({"HOROVOD_ELASTIC": "0"}, False),
    ({"HOROVOD_ELASTIC": ""}, False),
    ({}, False),
])
def test_a_run_is_elastic_when_horovodrun_says_so(environ, expected):
    assert is_elastic(environ) is expected


def test_a_malformed_elastic_variable_is_refused():
    with pytest.raises(ValueError, match="HOROVOD_ELASTIC must be an integer"):
        is_elastic({"HOROVOD_ELASTIC": "yes"})


@pytest.mark.parametrize(("done", "done_ranks", "ranks", "steps", "expected"), [
    (0, 2, 1, 89, 0),  # the last commit was at an epoch's end
    (22, 2, 1, 89, 44),  # shrink: one rank takes twice the steps for the same rows
    (44, 1, 2, 44, 22),  # grow
    (88, 1, 2, 44, 43),  # at least one step is left, so the epoch ends and is checkpointed
    (10, 2, 2, 44, 10),
])
def test_steps_done_convert_to_the_new_number_of_ranks(done, done_ranks, ranks, steps, expected):
    assert steps_already_done(done, done_ranks, ranks, steps) == expected


@pytest.mark.parametrize(("epoch", "done", "expected"), [
    (0, 0, [FitCall(0, 5, 44, 0)]),
    (2, 0, [FitCall(2, 5, 44, 0)]),
    (2, 10, [FitCall(2, 3, 34, 10), FitCall(3, 5, 44, 0)]),  # the rest of epoch 3, then epochs 4 and 5
    (4, 10, [FitCall(4, 5, 34, 10)]),
    (5, 0, []),
])
def test_training_resumes_with_the_rest_of_the_interrupted_epoch(epoch, done, expected):
    assert fit_calls(epoch, done, 44, 5) == expected


def small_model(optimizer: tf.keras.optimizers.legacy.Optimizer) -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    return model


def zeros(rows: int = 4) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((np.zeros((rows, 2), np.float32), np.zeros((rows, 1)))).batch(2)


class Positions(tf.keras.callbacks.Callback):
    def __init__(self, state) -> None:
        super().__init__()
        self.state, self.seen = state, []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append((self.state.epoch, self.state.batch))


def test_the_state_records_the_absolute_epoch_and_the_steps_done_in_it():
    model = small_model(tf.keras.optimizers.legacy.SGD(0.1))
    state = hvd.elastic.KerasState(model, epoch=2, batch=3, ranks=2)
    seen = Positions(state)
    # The rest of epoch 3 (3 of 5 steps were done), then epoch 4, as `fit_elastic` runs them.
    model.fit(zeros().repeat(), steps_per_epoch=2, initial_epoch=2, epochs=3, verbose=0,
              callbacks=[PositionCallback(state, ranks=1, steps_done=3), seen])
    model.fit(zeros().repeat(), steps_per_epoch=5, initial_epoch=3, epochs=4, verbose=0,
              callbacks=[PositionCallback(state, ranks=1), seen])
    assert seen.seen == [(2, 4), (2, 5), (3, 1), (3, 2), (3, 3), (3, 4), (3, 5)]
    assert (state.epoch, state.batch, state.ranks) == (4, 0, 1)


@pytest.mark.parametrize(("size", "expected"), [(1, 0.1), (3, 0.3)])
def test_a_reset_rescales_the_learning_rate_to_the_new_number_of_ranks(size, expected):
    optimizer = distributed_optimizer(tf.keras.optimizers.legacy.Adadelta(learning_rate=0.2))  # 2 ranks x 0.1
    model = small_model(optimizer)
    create_optimizer_slots(optimizer, model.trainable_variables)  # as `fit_elastic` does: the hyperparameters too
    state = hvd.elastic.KerasState(model, epoch=0, batch=0, ranks=2)
    state.register_reset_callbacks([RescaleLearningRate(optimizer, 0.1, size=lambda: size)])
    state.on_reset()
    assert float(tf.keras.backend.get_value(optimizer.learning_rate)) == pytest.approx(expected)


def test_the_commit_interval_is_a_flag_of_every_keras_program():
    parser = argparse.ArgumentParser()
    add_elastic_arguments(parser)
    assert parser.parse_args([]).commit_every_batches == DEFAULT_COMMIT_EVERY_BATCHES == 50
    assert parser.parse_args(["--commit-every-batches", "5"]).commit_every_batches == 5
    for program in (cifar_mixup_parser(), mnist_parser()):
        assert program.parse_args(["--commit-every-batches", "7"]).commit_every_batches == 7


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_the_commit_interval_must_be_a_positive_integer(value, capsys):
    parser = argparse.ArgumentParser()
    add_elastic_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--commit-every-batches", value])
    assert "--commit-every-batches" in capsys.readouterr().err


@pytest.fixture(scope="module")
def horovod():
    """Horovod in this process alone (size 1): `hvd.elastic.run` syncs the state with real broadcasts. Once per
    process: a standalone process runs Horovod on MPI, which cannot start again after its shutdown."""
    hvd.init()
    yield
    hvd.shutdown()


def failing_training(state) -> str:
    """A Keras fit whose input fails as a broken data file does: an OSError in a tf.data generator."""

    def rows():
        yield np.zeros((2, 2), np.float32), np.zeros((2, 1), np.float32)
        raise OSError("Unable to synchronously open file (file signature not found)")

    signature = (tf.TensorSpec((None, 2), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    state.model.fit(tf.data.Dataset.from_generator(rows, output_signature=signature).repeat(), steps_per_epoch=3,
                    epochs=1, verbose=0)
    return "trained"


def test_a_programs_own_error_fails_the_elastic_run(horovod):
    state = hvd.elastic.KerasState(small_model(tf.keras.optimizers.legacy.SGD(0.1)), epoch=0, batch=0)
    assert hvd.elastic.run(failing_training)(state) is None, "Horovod alone swallows the error"
    with pytest.raises(tf.errors.UnknownError, match="file signature not found"):
        run_elastic(failing_training, state)


def test_the_elastic_run_returns_what_training_returns(horovod):
    state = hvd.elastic.KerasState(small_model(tf.keras.optimizers.legacy.SGD(0.1)), epoch=3, batch=0)
    assert run_elastic(lambda synced: (synced.epoch, "trained"), state) == (3, "trained")
