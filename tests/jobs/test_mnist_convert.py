"""`python -m mnist.convert` on small files written in the public MNIST IDX format (plain and gzip)."""

from __future__ import annotations

import gzip
import struct
import subprocess
import sys

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.jobs


def idx_bytes(magic: int, array: np.ndarray) -> bytes:
    """The IDX layout spelled out independently of the converter: big-endian magic, dims, then the bytes."""
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape) + array.tobytes()


def write(path, data: bytes) -> None:
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)


def convert(source, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnist.convert", "--source", str(source), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_files_round_trip_to_hdf5(tmp_path, suffix):
    rng = np.random.default_rng(0)
    train_images = rng.integers(0, 256, (23, 28, 28), dtype=np.uint8)
    train_labels = rng.integers(0, 10, 23, dtype=np.uint8)
    test_images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    test_labels = rng.integers(0, 10, 7, dtype=np.uint8)
    source = tmp_path / "idx"
    source.mkdir()
    write(source / f"train-images-idx3-ubyte{suffix}", idx_bytes(2051, train_images))
    write(source / f"train-labels-idx1-ubyte{suffix}", idx_bytes(2049, train_labels))
    write(source / f"t10k-images-idx3-ubyte{suffix}", idx_bytes(2051, test_images))
    write(source / f"t10k-labels-idx1-ubyte{suffix}", idx_bytes(2049, test_labels))

    done = convert(source, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "(23 train images)" in done.stdout and "(7 test images)" in done.stdout
    for name, images, labels in (("train.h5", train_images, train_labels), ("test.h5", test_images, test_labels)):
        with h5py.File(tmp_path / "out" / name, "r") as handle:
            assert handle["images"].dtype == np.uint8
            np.testing.assert_array_equal(handle["images"][()], images)
            np.testing.assert_array_equal(handle["labels"][()], labels)
    assert not list((tmp_path / "out").glob("*.tmp")), "no temporary files left behind"


def test_wrong_magic_truncated_data_and_missing_files_are_one_line_errors(tmp_path):
    source = tmp_path / "idx"
    source.mkdir()
    images = np.zeros((5, 28, 28), np.uint8)
    labels = np.zeros(5, np.uint8)
    write(source / "train-images-idx3-ubyte", idx_bytes(2049, images))  # a labels magic on an images file
    write(source / "train-labels-idx1-ubyte", idx_bytes(2049, labels))
    write(source / "t10k-images-idx3-ubyte", idx_bytes(2051, images))
    write(source / "t10k-labels-idx1-ubyte", idx_bytes(2049, labels))
    done = convert(source, tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"mnist.convert: error: {source / 'train-images-idx3-ubyte'}: IDX magic number 2049, expected 2051 (images); "
        "check the file names"]

    write(source / "train-images-idx3-ubyte", idx_bytes(2051, images)[:-100])
    done = convert(source, tmp_path / "out")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "truncated: header promises 5 rows" in done.stderr

    (source / "t10k-labels-idx1-ubyte").unlink()
    write(source / "train-images-idx3-ubyte", idx_bytes(2051, images))
    done = convert(source, tmp_path / "out")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "t10k-labels-idx1-ubyte[.gz]: not found" in done.stderr
    assert not (tmp_path / "out" / "test.h5").exists()
