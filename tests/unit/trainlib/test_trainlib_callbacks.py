"""Rank 0's callbacks: the work of an epoch's end runs on one background thread in order, progress goes out by time,
the plot is redrawn by time, and a failed save still stops training."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import tensorflow as tf

from trainlib.callbacks import BackgroundWriter, CheckpointCallback, HistoryCallback, ProgressCallback
from trainlib.checkpoints import CheckpointManager
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_writer_runs_tasks_in_order_off_the_training_thread_and_waits_for_them():
    writer, seen = BackgroundWriter(), []
    release = threading.Event()
    writer.submit(lambda: (release.wait(10), seen.append(("first", threading.current_thread().name))))
    writer.submit(lambda: seen.append(("second", threading.current_thread().name)))
    assert seen == [], "submit returns before the task ran"
    release.set()
    writer.on_train_end()
    assert [word for word, _ in seen] == ["first", "second"]
    assert all(name.startswith("trainlib-writer") for _, name in seen)


def test_a_failed_task_is_raised_in_the_training_thread():
    writer = BackgroundWriter()

    def fail() -> None:
        raise OSError("disk full")

    writer.submit(fail)
    with pytest.raises(OSError, match="disk full"):
        writer.flush()


def test_progress_goes_out_by_time_the_last_epoch_always_and_a_held_one_at_the_end():
    sent, clock = [], Clock()
    reporter = ProgressReporter("ns", "job", lambda namespace, name, body: sent.append(body["status"]["progress"]))
    callback = ProgressCallback(reporter, epochs=6, steps_per_epoch=10, report_interval=15.0, clock=clock)
    for epoch, now in enumerate((1.0, 5.0, 17.0, 20.0)):
        clock.now = now
        callback.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1)})
    assert [progress["epoch"] for progress in sent] == [1, 3], "epochs 2 and 4 came too soon after a report"
    callback.on_train_end()  # stopped early (e.g. preempted): the newest epoch still reaches the status
    assert [progress["epoch"] for progress in sent] == [1, 3, 4]
    clock.now = 21.0
    callback.on_epoch_end(5, {"loss": 0.1})
    assert sent[-1]["epoch"] == 6 and sent[-1]["step"] == 60, "the last epoch is never held back"


def test_progress_sends_every_epoch_of_the_history_also_the_held_ones_and_a_resumed_runs_earlier_ones(tmp_path):
    earlier = HistoryLog(str(tmp_path), "run", plot_interval=3600.0)
    for epoch in (1, 2, 3):
        earlier.append(epoch, {"loss": 1.0 / epoch})
    history = HistoryLog(str(tmp_path), "run", plot_interval=3600.0)  # rank 0 restarted
    history.resume_at(2)  # from the checkpoint of epoch 2
    sent, clock, writer = [], Clock(), BackgroundWriter()
    reporter = ProgressReporter("ns", "job", lambda namespace, name, body: sent.append(body["status"]["progress"]))
    callbacks = [HistoryCallback(history, writer),
                 ProgressCallback(reporter, epochs=6, steps_per_epoch=10, writer=writer, report_interval=15.0,
                                  clock=clock, history=history), writer]
    for epoch, now in ((2, 1.0), (3, 5.0), (4, 17.0)):  # Keras numbers from 0: epochs 3, 4 and 5
        clock.now = now
        for callback in callbacks:
            callback.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1)})
    writer.flush()
    assert [progress["epoch"] for progress in sent] == [3, 5], "epoch 4 came too soon after a report"
    assert sent[-1]["history"] == [{"epoch": epoch, "metrics": {"loss": 1.0 / epoch}} for epoch in range(1, 6)]


def test_checkpoint_history_and_progress_written_in_the_background_name_the_same_epoch(tmp_path):
    patches, writer = [], BackgroundWriter()
    reporter = ProgressReporter("ns", "job", lambda namespace, name, body: patches.append(body["status"]))
    weights = tf.Variable([1.0, 2.0])
    checkpoints = CheckpointCallback(CheckpointManager(str(tmp_path), keep=2), {"model": [weights]}, writer=writer)
    callbacks = [checkpoints, HistoryCallback(HistoryLog(str(tmp_path), "demo", plot_interval=3600.0), writer),
                 ProgressCallback(reporter, epochs=3, steps_per_epoch=10, checkpoints=checkpoints, writer=writer),
                 writer]
    for epoch in range(3):
        weights.assign_add([1.0, 1.0])
        for callback in callbacks:
            callback.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1)})
        weights.assign([-1.0, -1.0])  # training goes on: the checkpoint holds the values at the epoch's end
    for callback in callbacks:
        callback.on_train_end()
    latest = checkpoints.manager.latest()
    state, _ = checkpoints.manager.load(latest)
    np.testing.assert_array_equal(state["model"][0], [0.0, 0.0])  # -1 + 1 at the third epoch's end, not -1
    assert [status["checkpoint"]["epoch"] for status in patches] == [1, 2, 3]
    assert [record["epoch"] for record in json.loads((tmp_path / "history.json").read_text())["epochs"]] == [1, 2, 3]


def test_history_png_is_redrawn_by_time_and_once_at_the_end(tmp_path):
    clock = Clock()
    history = HistoryLog(str(tmp_path), "run", plot_interval=30.0, clock=clock)
    history.append(1, {"loss": 1.0})
    drawn = (tmp_path / "history.png").stat().st_mtime_ns
    clock.now = 10.0
    history.append(2, {"loss": 0.5})
    assert (tmp_path / "history.png").stat().st_mtime_ns == drawn, "not redrawn within 30 s"
    assert len(json.loads((tmp_path / "history.json").read_text())["epochs"]) == 2, "the JSON always is"
    history.finish()
    assert (tmp_path / "history.png").stat().st_mtime_ns != drawn
