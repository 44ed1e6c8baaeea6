"""Rank 0's TensorBoard event files, read back with TensorBoard's own reader: every epoch's metrics as history.json
has them, the learning rate every N steps, the graph once, written on the background writer, and a resumed run keeping
only what belongs to the restored state."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from trainlib.callbacks import BackgroundWriter, HistoryCallback, TensorBoardCallback
from trainlib.checkpoints import CheckpointManager
from trainlib.custom_loop import EpochRecorder
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter
from trainlib.tensorboard import (
    LEARNING_RATE_TAG,
    TensorBoardLog,
    current_learning_rate,
    is_due,
    log_directory,
)


def read(directory: Path) -> EventAccumulator:
    events = EventAccumulator(str(directory), size_guidance={"tensors": 0})
    events.Reload()
    return events


def scalars(events: EventAccumulator, tag: str) -> dict[int, float]:
    return {event.step: float(tf.make_ndarray(event.tensor_proto)) for event in events.Tensors(tag)}


def epoch_tags(events: EventAccumulator) -> set[str]:
    return {tag for tag in events.Tags()["tensors"] if tag.startswith("epoch/")}


@pytest.mark.parametrize(("step", "every", "due"), [(50, 50, True), (100, 50, True), (49, 50, False), (0, 50, False),
                                                    (50, 0, False), (1, 1, True)])
def test_the_learning_rate_is_due_every_n_steps_and_never_with_0(step, every, due):
    assert is_due(step, every) is due


def test_the_rate_is_the_optimizers_value_or_its_schedules_at_the_current_step():
    plain = tf.keras.optimizers.legacy.SGD(0.25)
    assert current_learning_rate(plain) == pytest.approx(0.25)
    schedule = tf.keras.optimizers.schedules.PiecewiseConstantDecay([10], [0.5, 0.05])
    scheduled = tf.keras.optimizers.legacy.Adam(schedule)
    assert current_learning_rate(scheduled) == pytest.approx(0.5)
    scheduled.iterations.assign(11)
    assert current_learning_rate(scheduled) == pytest.approx(0.05)


def test_epoch_metrics_are_the_finite_values_history_gets_at_step_epoch(tmp_path):
    log = TensorBoardLog(str(tmp_path), every_steps=50)
    log.epoch(1, {"loss": 0.75, "val_accuracy": 0.5, "broken": float("nan")})
    log.epoch(2, {"loss": np.float32(0.5), "val_accuracy": 0.625})
    log.close()
    events = read(tmp_path / "tensorboard")
    assert epoch_tags(events) == {"epoch/loss", "epoch/val_accuracy"}
    assert scalars(events, "epoch/loss") == {1: 0.75, 2: 0.5}
    assert scalars(events, "epoch/val_accuracy") == {1: 0.5, 2: 0.625}


def write_run(directory: Path, epochs: int, every: int, steps_per_epoch: int) -> None:
    log = TensorBoardLog(str(directory), every_steps=every)
    for epoch in range(1, epochs + 1):
        for step in range((epoch - 1) * steps_per_epoch + 1, epoch * steps_per_epoch + 1):
            if is_due(step, every):
                log.learning_rate(step, 0.1 * epoch)
        log.epoch(epoch, {"loss": 1.0 / epoch})
    log.close()


def test_a_resume_keeps_only_the_epochs_and_steps_of_the_restored_state(tmp_path):
    write_run(tmp_path, epochs=4, every=5, steps_per_epoch=10)  # the killed attempt got to epoch 4
    resumed = TensorBoardLog(str(tmp_path), every_steps=5)
    resumed.resume_at(epochs_done=2, steps_done=20)  # its latest checkpoint holds epoch 2
    resumed.epoch(3, {"loss": 0.3})
    resumed.close()
    events = read(log_directory(str(tmp_path)))
    assert scalars(events, "epoch/loss") == pytest.approx({1: 1.0, 2: 0.5, 3: 0.3})
    assert sorted(scalars(events, LEARNING_RATE_TAG)) == [5, 10, 15, 20]
    assert len(list((tmp_path / "tensorboard").iterdir())) == 1, "the old files are replaced by this run's"


def test_a_killed_writers_partial_record_is_read_up_to_it(tmp_path):
    write_run(tmp_path, epochs=3, every=0, steps_per_epoch=10)
    (file,) = (tmp_path / "tensorboard").iterdir()
    file.write_bytes(file.read_bytes()[:-7])  # the last record cut short
    resumed = TensorBoardLog(str(tmp_path), every_steps=0)
    resumed.resume_at(epochs_done=3, steps_done=30)
    resumed.close()
    assert scalars(read(tmp_path / "tensorboard"), "epoch/loss") == pytest.approx({1: 1.0, 2: 0.5})


def tiny_model() -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer=tf.keras.optimizers.legacy.SGD(0.125), loss="categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def tiny_data() -> tf.data.Dataset:
    features = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    labels = np.eye(2, dtype=np.float32)[np.arange(64) % 2]
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(8).repeat()


def test_fit_writes_what_history_json_gets_the_rate_every_n_steps_and_the_graph(tmp_path):
    writer = BackgroundWriter()
    callbacks = [HistoryCallback(HistoryLog(str(tmp_path), "tiny"), writer),
                 TensorBoardCallback(TensorBoardLog(str(tmp_path), every_steps=3), initial_epoch=0, writer=writer),
                 writer]
    tiny_model().fit(tiny_data(), steps_per_epoch=4, epochs=3, callbacks=callbacks, verbose=0)
    history = json.loads((tmp_path / "history.json").read_text())["epochs"]
    events = read(tmp_path / "tensorboard")
    assert epoch_tags(events) == {f"epoch/{name}" for name in history[0] if name != "epoch"}
    for name in ("loss", "accuracy"):
        assert scalars(events, f"epoch/{name}") == pytest.approx(
            {record["epoch"]: record[name] for record in history}, rel=1e-6)
    assert scalars(events, LEARNING_RATE_TAG) == pytest.approx({3: 0.125, 6: 0.125, 9: 0.125, 12: 0.125})
    assert events.Tags()["graph"], "the model's graph is in the event files"


def test_the_callback_only_hands_the_writes_to_the_writer(tmp_path):
    writer, release = BackgroundWriter(), threading.Event()
    writer.submit(lambda: release.wait(30))  # the writer is busy until the fit has ended
    callback = TensorBoardCallback(TensorBoardLog(str(tmp_path), every_steps=1), initial_epoch=0, writer=writer)
    tiny_model().fit(tiny_data(), steps_per_epoch=2, epochs=2, callbacks=[callback], verbose=0)
    assert not (tmp_path / "tensorboard").exists(), "an event file was written in the training thread"
    release.set()
    writer.flush()
    assert sorted(scalars(read(tmp_path / "tensorboard"), LEARNING_RATE_TAG)) == [1, 2, 3, 4]


def test_the_custom_loop_recorder_writes_epochs_and_every_nth_rate_from_the_restored_step(tmp_path):
    recorder = EpochRecorder(CheckpointManager(str(tmp_path), keep=2), HistoryLog(str(tmp_path), "loop"),
                             ProgressReporter("ns", "job", None), epochs=3, steps_per_epoch=4,
                             writer=BackgroundWriter(), tensorboard=TensorBoardLog(str(tmp_path), every_steps=3))
    model, weights = tiny_model(), tf.Variable([1.0])
    recorder.resume_at(1, model)  # a checkpoint of epoch 1: 4 steps done
    for epoch in (2, 3):
        for _ in range(4):
            recorder.after_step(model.optimizer)
        recorder.record(epoch, {"loss": 1.0 / epoch}, {"model": [weights]})
    recorder.finish()
    events = read(tmp_path / "tensorboard")
    assert scalars(events, "epoch/loss") == pytest.approx({2: 0.5, 3: 1 / 3})
    assert sorted(scalars(events, LEARNING_RATE_TAG)) == [6, 9, 12]
    assert events.Tags()["graph"]
