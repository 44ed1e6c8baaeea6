"""`python -m cifar_mixup.convert` on small files in the public CIFAR-10 python format, and on sklearn digits."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import tarfile

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.jobs

ROWS = {**{f"data_batch_{index}": 6 + index for index in range(1, 6)}, "test_batch": 5}


def cifar_batches(seed: int = 0) -> dict[str, dict]:
    """Pickled-dict batches as the CIFAR-10 python version ships them (bytes keys, (N, 3072) uint8 planar rows)."""
    rng = np.random.default_rng(seed)
    return {name: {b"batch_label": name.encode(), b"data": rng.integers(0, 256, (rows, 3072), dtype=np.uint8),
                   b"labels": [int(label) for label in rng.integers(0, 10, rows)],
                   b"filenames": [f"img_{i}.png".encode() for i in range(rows)]}
            for name, rows in ROWS.items()}


def convert(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cifar_mixup.convert", *args], capture_output=True, text=True,
                          timeout=120)


def check_round_trip(out, batches) -> None:
    for name, batch_names in (("train.h5", [f"data_batch_{i}" for i in range(1, 6)]), ("test.h5", ["test_batch"])):
        rows = np.concatenate([batches[batch][b"data"] for batch in batch_names])
        labels = np.concatenate([batches[batch][b"labels"] for batch in batch_names])
        with h5py.File(out / name, "r") as handle:
            images = handle["images"][()]
            assert images.shape == (len(rows), 32, 32, 3) and images.dtype == np.uint8
            np.testing.assert_array_equal(handle["labels"][()], labels)
        # the public layout: 1024 red values, then green, then blue, each 32x32 row-major
        np.testing.assert_array_equal(images[:, 0, 0, 0], rows[:, 0])
        np.testing.assert_array_equal(images[:, 0, 1, 0], rows[:, 1])
        np.testing.assert_array_equal(images[:, 1, 0, 0], rows[:, 32])
        np.testing.assert_array_equal(images[:, 0, 0, 1], rows[:, 1024])
        np.testing.assert_array_equal(images[:, 31, 31, 2], rows[:, 3071])
        np.testing.assert_array_equal(images.transpose(0, 3, 1, 2).reshape(len(rows), -1), rows)


def test_cifar10_python_batches_round_trip(tmp_path):
    batches = cifar_batches()
    source = tmp_path / "cifar-10-batches-py"
    source.mkdir()
    for name, batch in batches.items():
        (source / name).write_bytes(pickle.dumps(batch))
    done = convert("cifar10", "--source", str(source), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "(45 images)" in done.stdout and "(5 images)" in done.stdout
    check_round_trip(tmp_path / "out", batches)


def test_cifar10_archive_is_read_without_extracting(tmp_path):
    batches = cifar_batches(seed=1)
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, batch in batches.items():
            payload = pickle.dumps(batch)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    done = convert("cifar10", "--source", str(archive), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    check_round_trip(tmp_path / "out", batches)


def test_missing_or_malformed_batches_are_one_line_errors(tmp_path):
    source = tmp_path / "batches"
    source.mkdir()
    batches = cifar_batches()
    for name, batch in batches.items():
        if name != "data_batch_3":
            (source / name).write_bytes(pickle.dumps(batch))
    done = convert("cifar10", "--source", str(source), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert f"{source / 'data_batch_3'}: CIFAR-10 batch not found" in done.stderr
    assert not (tmp_path / "out" / "train.h5").exists(), "no half-written file under the final name"

    bad = {**batches["data_batch_1"], b"data": np.zeros((7, 1024), np.uint8)}
    (source / "data_batch_3").write_bytes(pickle.dumps(bad))
    done = convert("cifar10", "--source", str(source), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "b'data' must be (N, 3072) uint8, found (7, 1024) uint8" in done.stderr


def test_digits_are_split_into_disjoint_train_and_held_out_sets(tmp_path):
    from sklearn.datasets import load_digits

    done = convert("digits", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    with h5py.File(tmp_path / "train.h5") as train, h5py.File(tmp_path / "test.h5") as test:
        train_images, test_images = train["images"][()], test["images"][()]
        train_labels, test_labels = train["labels"][()], test["labels"][()]
    assert train_images.shape == (1437, 8, 8, 1) and test_images.shape == (360, 8, 8, 1)
    assert train_images.dtype == np.uint8 and train_images.max() == 255
    assert sorted(set(test_labels)) == list(range(10)), "stratified: every class is held out"
    digits = load_digits()
    expected = {(np.round(image * 255 / 16).astype(np.uint8).tobytes(), int(label))
                for image, label in zip(digits.images, digits.target, strict=True)}
    converted = [(image[..., 0].tobytes(), int(label)) for image, label in
                 zip(np.concatenate([train_images, test_images]), np.concatenate([train_labels, test_labels]),
                     strict=True)]
    assert len(converted) == 1797 and set(converted) == expected
