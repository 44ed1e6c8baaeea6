"""A process exits when it ends while its HDF5 training pipeline is reading: on return, on an error, on SIGTERM.

tf.data runs the pipeline's Python readers on its own threads. Before `hdf5_input.ReaderGate`, a process that ended
mid-epoch with its iterator still held (a global, an exception's traceback) often never exited: CPython ended the reader
thread that asked for Python's lock during the shutdown, and the iterator's destructor waited for it forever. That hit
between one run in ten and one in two, varying with load, so each case builds, reads and exits many times, two
processes at once, each under a timeout.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest

from trainlib.hdf5_input import GatedReader, ReaderGate

IMAGES = 20_000  # a 32x32x3 uint8 file of this size: readers still busy when a process stops consuming
RUNS = 12  # per case; before the fix 3 to 6 "return" runs of 12 hung, and 0 to 8 "raise" runs
PARALLEL = 2  # children at once
EXIT_TIMEOUT = 60.0  # seconds for one child, start to exit (a run takes about 3 s)

# Builds the training pipeline with MixUp and reads it as a program does, then ends as told: "return" falls off the end
# with the iterator in a global, "raise" raises mid-epoch with the iterator in the traceback's frame, "sigterm" reads
# until it is killed (it touches `ready` first).
CHILD = """
import sys
from pathlib import Path

import tensorflow as tf

from trainlib.hdf5_input import ArraySpec, make_dataset, validate_files
from trainlib.mixup import apply_mixup

path, case, ready = sys.argv[1:4]
specs = [ArraySpec("images", (32, 32, 3), dtype="uint8"), ArraySpec("labels", (), kinds="iu")]
files = validate_files([path], specs, "regenerate")


def preprocess(image, label):
    return tf.cast(image, tf.float32) / 255.0, tf.one_hot(label, 10)


train = make_dataset(files, ["images", "labels"], rank=0, size=1, batch_size=32, training=True, preprocess=preprocess,
                     batch_transform=apply_mixup(0.2))


def read(batches):
    iterator = iter(train.dataset)
    for count in range(1, batches + 1):
        next(iterator)
        if case == "raise" and count == batches:
            raise RuntimeError(f"failed after {count} batches")
        if case == "sigterm" and count == 20:
            Path(ready).touch()
    return iterator


if case == "sigterm":
    read(10**9)
kept = read(320)
print("read 320 batches", flush=True)
"""

EXPECTED = {"return": 0, "raise": 1, "sigterm": -signal.SIGTERM}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The data file and the child script, written once for every case."""
    path = tmp_path_factory.mktemp("pipeline_exit")
    rng = np.random.default_rng(0)
    with h5py.File(path / "train.h5", "w") as handle:
        handle["images"] = rng.integers(0, 256, (IMAGES, 32, 32, 3), dtype=np.uint8)
        handle["labels"] = rng.integers(0, 10, IMAGES).astype(np.int64)
    (path / "child.py").write_text(CHILD)
    return path


def run_child(workdir: Path, case: str, run: int) -> str | None:
    """One build-read-exit process; None if it exited as expected in time, else what went wrong."""
    ready = workdir / f"ready-{case}-{run}"
    process = subprocess.Popen([sys.executable, str(workdir / "child.py"), str(workdir / "train.h5"), case, str(ready)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + EXIT_TIMEOUT
    if case == "sigterm":
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        return f"{case} run {run}: still running after {EXIT_TIMEOUT:.0f} s (stdout {out.strip()!r})"
    if process.returncode != EXPECTED[case]:
        return f"{case} run {run}: exit code {process.returncode}, expected {EXPECTED[case]}: {err[-2000:]}"
    if case == "return" and "read 320 batches" not in out:
        return f"{case} run {run}: no result printed: {err[-2000:]}"
    if case == "raise" and "RuntimeError: failed after 320 batches" not in err:
        return f"{case} run {run}: not the child's own error: {err[-2000:]}"
    return None


@pytest.mark.parametrize("case", ["return", "raise", "sigterm"])
def test_a_process_ending_mid_epoch_exits_every_time(workdir, case):
    runs = RUNS if case != "sigterm" else RUNS // 3  # SIGTERM's default action never runs Python's shutdown
    with ThreadPoolExecutor(PARALLEL) as pool:
        problems = [problem for problem in pool.map(lambda run: run_child(workdir, case, run), range(runs)) if problem]
    assert not problems, "\n".join(problems)


def numbered_blocks(count: int, closed: list[bool]):
    try:
        for number in range(count):
            yield (np.array([number]),)
    finally:
        closed.append(True)


def test_a_closed_gate_ends_each_reader_at_its_next_call_and_closes_its_blocks():
    gate, closed = ReaderGate(settle=0.0), []
    reader = gate.reader(numbered_blocks(5, closed))
    assert isinstance(reader, GatedReader) and iter(reader) is reader
    assert next(reader)[0].tolist() == [0]
    gate.close()
    with pytest.raises(StopIteration):
        next(reader)
    assert closed == [True], "the blocks' files are closed"
    with pytest.raises(StopIteration):
        next(gate.reader(numbered_blocks(5, [])))


def test_closing_waits_for_a_running_call_and_then_for_quiet():
    gate, started, release = ReaderGate(settle=0.2), threading.Event(), threading.Event()

    def slow_blocks():
        started.set()
        release.wait()
        yield (np.array([1]),)

    reader = gate.reader(slow_blocks())
    caller = threading.Thread(target=lambda: next(reader))
    caller.start()
    started.wait()
    threading.Timer(0.3, release.set).start()
    begun = time.monotonic()
    gate.close()
    waited = time.monotonic() - begun
    caller.join()
    assert waited >= 0.3 + 0.2 - 0.05, "close returns only once the call has finished and the pipeline is quiet"
