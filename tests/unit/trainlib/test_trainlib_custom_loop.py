"""Custom-loop support: Horovod's warm-up formula and rank 0's end-of-epoch checkpoint, history and progress."""

import json
import threading

import numpy as np
import pytest
import tensorflow as tf

from trainlib.callbacks import BackgroundWriter
from trainlib.checkpoints import CheckpointManager
from trainlib.custom_loop import EpochRecorder, warmup_learning_rate
from trainlib.distributed import WorkerContext
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter


def test_warmup_ramps_from_one_rank_rate_to_the_scaled_rate():
    assert warmup_learning_rate(0.4, 4, 0.0, 2) == pytest.approx(0.1)
    assert warmup_learning_rate(0.4, 4, 1.0, 2) == pytest.approx(0.25)
    assert warmup_learning_rate(0.4, 4, 2.0, 2) == pytest.approx(0.4)
    assert warmup_learning_rate(0.4, 4, 0.0, 0) == pytest.approx(0.4)


def test_only_rank_zero_gets_a_recorder(tmp_path):
    assert EpochRecorder.for_rank(WorkerContext(1, 2, 1), str(tmp_path), 2, "t", 3, 10) is None
    assert not list(tmp_path.iterdir())


def test_record_saves_checkpoint_history_and_reports_progress(tmp_path):
    patches = []
    reporter = ProgressReporter("ns", "job", lambda namespace, name, body: patches.append((namespace, name, body)))
    recorder = EpochRecorder(CheckpointManager(str(tmp_path), keep=2), HistoryLog(str(tmp_path), "demo"), reporter,
                             epochs=3, steps_per_epoch=10)
    weights = tf.Variable([1.0, 2.0])
    for epoch in (1, 2, 3):
        weights.assign_add([1.0, 1.0])
        recorder.record(epoch, {"loss": 1.0 / epoch}, {"model": [weights]})
    assert recorder.finish().epoch == 3
    latest = recorder.manager.latest()
    assert latest.epoch == 3 and len(recorder.manager.checkpoints()) == 2
    state, _ = recorder.manager.load(latest)
    np.testing.assert_array_equal(state["model"][0], [4.0, 5.0])
    history = json.loads((tmp_path / "history.json").read_text())
    assert [record["epoch"] for record in history["epochs"]] == [1, 2, 3]
    assert (tmp_path / "history.png").exists()
    progress = patches[-1][2]["status"]
    assert progress["progress"]["epoch"] == 3 and progress["progress"]["step"] == 30
    assert progress["checkpoint"]["epoch"] == 3


def test_a_resumed_recorder_reports_the_earlier_attempts_epochs_from_history_json(tmp_path):
    """Rank 0 restarts from the checkpoint of epoch 2: the status's history still starts at epoch 1."""
    first = EpochRecorder(CheckpointManager(str(tmp_path), keep=3), HistoryLog(str(tmp_path), "demo"),
                          ProgressReporter("ns", "job", None), epochs=4, steps_per_epoch=10)
    weights = tf.Variable([1.0])
    for epoch in (1, 2, 3):
        first.record(epoch, {"loss": 1.0 / epoch}, {"model": [weights]})
    patches = []
    resumed = EpochRecorder(CheckpointManager(str(tmp_path), keep=3), HistoryLog(str(tmp_path), "demo"),
                            ProgressReporter("ns", "job", lambda namespace, name, body: patches.append(body)),
                            epochs=4, steps_per_epoch=10)
    resumed.resume_at(2)  # the checkpoint restored is epoch 2's: epoch 3 is trained again
    resumed.record(3, {"loss": 0.3, "accuracy": float("nan")}, {"model": [weights]})
    resumed.finish()
    assert patches[0]["status"]["progress"]["history"] == [
        {"epoch": 1, "metrics": {"loss": 1.0}}, {"epoch": 2, "metrics": {"loss": 0.5}},
        {"epoch": 3, "metrics": {"loss": 0.3}}]


def test_with_a_writer_record_returns_before_the_writes_and_saves_the_weights_of_its_epoch(tmp_path):
    released, patches = threading.Event(), []

    def slow_patch(namespace, name, body):
        assert released.wait(30), "the API server never answered"
        patches.append(body)

    recorder = EpochRecorder(CheckpointManager(str(tmp_path), keep=3), HistoryLog(str(tmp_path), "demo"),
                             ProgressReporter("ns", "job", slow_patch), epochs=2, steps_per_epoch=5,
                             writer=BackgroundWriter())
    weights = tf.Variable([1.0])
    recorder.record(1, {"loss": 0.5}, {"model": [weights]})
    weights.assign([7.0])  # training goes on while epoch 1 is written
    recorder.record(2, {"loss": 0.25}, {"model": [weights]})
    assert not patches, "both records returned while the status patch was still waiting"
    released.set()
    assert recorder.finish().epoch == 2 and len(patches) == 2
    second, first = recorder.manager.checkpoints()  # newest first
    assert recorder.manager.load(first)[0]["model"][0].tolist() == [1.0]
    assert recorder.manager.load(second)[0]["model"][0].tolist() == [7.0]


def test_a_failed_checkpoint_write_is_raised_by_finish(tmp_path):
    blocked = tmp_path / "checkpoints"
    blocked.write_text("a file where the checkpoint directory should be")
    recorder = EpochRecorder(CheckpointManager(str(blocked), keep=3), HistoryLog(str(tmp_path), "demo"),
                             ProgressReporter("ns", "job", None), epochs=2, steps_per_epoch=5,
                             writer=BackgroundWriter())
    recorder.record(1, {"loss": 0.5}, {"model": [tf.Variable([1.0])]})
    with pytest.raises(OSError):
        recorder.finish()
