"""Rank 0's checkpoints: atomic saves, keep the last K, and never a corrupt "latest" -- even after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from trainlib.checkpoints import CheckpointManager, state_digest


def state_for(epoch: int, size: int = 10) -> dict[str, list[np.ndarray]]:
    """Arrays whose every value says which epoch wrote them."""
    return {"model": [np.full((size, 4), epoch, np.float32), np.full(3, epoch, np.float32)],
            "optimizer": [np.array(epoch * 10, np.int64)]}


def test_save_then_load_round_trips_state_names_and_metrics(tmp_path):
    manager = CheckpointManager(str(tmp_path / "ckpt"))
    assert manager.latest() is None, "an empty or missing directory means a fresh start"
    saved = manager.save(1, state_for(1), {"loss": 0.5, "accuracy": np.float32(0.25), "note": "x",
                                           "bad": float("nan")}, names={"model": ["kernel", "bias"]})
    latest = manager.latest()
    assert latest == saved and latest.epoch == 1
    assert latest.metrics == {"loss": 0.5, "accuracy": 0.25}
    state, names = manager.load(latest)
    assert names["model"] == ["kernel", "bias"]
    for group, arrays in state_for(1).items():
        for loaded, original in zip(state[group], arrays, strict=True):
            np.testing.assert_array_equal(loaded, original)
    record = json.loads((tmp_path / "ckpt" / "ckpt-000001.json").read_text())
    assert record["epoch"] == 1 and record["rank"] == 0 and record["groups"] == {"model": 2, "optimizer": 1}


def test_keeps_only_the_newest_k(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=2)
    for epoch in range(1, 6):
        manager.save(epoch, state_for(epoch), {"loss": 1.0 / epoch})
    assert [checkpoint.epoch for checkpoint in manager.checkpoints()] == [5, 4]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000004.h5", "ckpt-000004.json", "ckpt-000005.h5",
                                            "ckpt-000005.json"]


def test_uncommitted_or_damaged_checkpoints_are_skipped(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=5)
    manager.save(1, state_for(1), {})
    manager.save(2, state_for(2), {})
    manager.save(3, state_for(3), {})
    (tmp_path / "ckpt-000003.json").unlink()  # killed between the state file and its commit record
    assert manager.latest().epoch == 2
    damaged = bytearray((tmp_path / "ckpt-000002.h5").read_bytes())  # bit rot in the newest committed state
    damaged[len(damaged) // 2] ^= 0xFF
    (tmp_path / "ckpt-000002.h5").write_bytes(bytes(damaged))
    assert manager.latest().epoch == 1
    state, _ = manager.load(manager.latest())
    assert state["optimizer"][0] == 10


SAVE_FOREVER = textwrap.dedent("""
    import sys
    import numpy as np
    from trainlib.checkpoints import CheckpointManager
    manager = CheckpointManager(sys.argv[1], keep=2)
    epoch = 0
    while True:
        epoch += 1
        manager.save(epoch, {"model": [np.full((256, 1024), epoch, np.float32)] * 4}, {"epoch": epoch})
        print(epoch, flush=True)
""")


def test_kill_9_at_any_moment_never_leaves_a_corrupt_latest(tmp_path):
    """A process saving 4 MiB checkpoints in a loop is killed at varying moments, also mid-write; afterwards the
    latest checkpoint always loads and holds exactly the values of its epoch."""
    directory = tmp_path / "ckpt"
    manager = CheckpointManager(str(directory))
    epochs_seen = []
    for attempt in range(8):
        saver = subprocess.Popen([sys.executable, "-c", SAVE_FOREVER, str(directory)], stdout=subprocess.PIPE,
                                 text=True)
        first = int(saver.stdout.readline())  # at least one save of this process has completed
        time.sleep(0.013 * attempt)
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        latest = manager.latest()
        assert latest is not None and latest.epoch >= first
        state, _ = manager.load(latest)
        assert len(state["model"]) == 4
        for array in state["model"]:
            assert array.shape == (256, 1024) and np.all(array == latest.epoch)
        assert latest.metrics == {"epoch": float(latest.epoch)}
        epochs_seen.append(latest.epoch)
    leftovers = [name for name in os.listdir(directory) if name.endswith(".tmp")]
    assert len(leftovers) <= 2, "at most the last killed save's temporaries remain; the next save removes them"
    manager.save(100, {"model": [np.zeros(1)]}, {})
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]


def test_digest_changes_with_any_value():
    arrays = [np.zeros((2, 2), np.float32), np.ones(3, np.float32)]
    changed = [arrays[0].copy(), arrays[1].copy()]
    changed[1][2] = np.nextafter(np.float32(1), np.float32(2))
    assert state_digest(arrays) == state_digest([a.copy() for a in arrays])
    assert state_digest(arrays) != state_digest(changed)


def test_keep_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep must be at least 1"):
        CheckpointManager(str(tmp_path), keep=0)
