"""CIFAR-shaped data for the benchmarks. HDF5 files written with trainlib's own writer (the layout cifar_mixup.convert
writes: images (N, 32, 32, 3) uint8, labels (N,) int64, 1024-row chunks), or CIFAR-10's python batches for the
converter itself. Pixels and labels are random: these files measure speed and memory, never accuracy."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

from trainlib.hdf5_writer import HDF5Writer

IMAGE_SHAPE = (32, 32, 3)
NUM_CLASSES = 10
WRITE_ROWS = 4096
CIFAR10_TRAIN_BATCHES = 5  # data_batch_1..5, as CIFAR-10's python version ships them


def write_cifar_like(path: Path, rows: int, seed: int = 0) -> Path:
    """Write `rows` random CIFAR-shaped examples to `path`."""
    rng = np.random.default_rng(seed)
    layout = {"images": (IMAGE_SHAPE, "uint8"), "labels": ((), "int64")}
    with HDF5Writer(str(path), layout, attrs={"source": "random benchmark data"}) as writer:
        for start in range(0, rows, WRITE_ROWS):
            count = min(WRITE_ROWS, rows - start)
            writer.append(images=rng.integers(0, 256, (count, *IMAGE_SHAPE), dtype=np.uint8),
                          labels=rng.integers(0, NUM_CLASSES, count, dtype=np.int64))
    return path


def write_cifar10_python(directory: Path, train_rows: int, test_rows: int, seed: int = 0) -> Path:
    """Write random images in CIFAR-10's python layout: `data_batch_1..5` (`train_rows` split between them) and
    `test_batch`, each a pickled dict of b"data" (N, 3072) uint8, channel-planar rows, and b"labels" (a list of N
    ints). `python -m cifar_mixup.convert cifar10 --source <directory>` reads them."""
    if train_rows < CIFAR10_TRAIN_BATCHES or test_rows < 1:
        raise ValueError(f"need at least {CIFAR10_TRAIN_BATCHES} training rows and 1 test row, got {train_rows} and "
                         f"{test_rows}")
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    row_bytes = int(np.prod(IMAGE_SHAPE))
    counts = [len(part) for part in np.array_split(np.arange(train_rows), CIFAR10_TRAIN_BATCHES)]
    names = [f"data_batch_{index}" for index in range(1, CIFAR10_TRAIN_BATCHES + 1)]
    for name, count in [*zip(names, counts, strict=True), ("test_batch", test_rows)]:
        batch = {b"data": rng.integers(0, 256, (count, row_bytes), dtype=np.uint8),
                 b"labels": rng.integers(0, NUM_CLASSES, count).tolist()}
        with open(directory / name, "wb") as handle:
            pickle.dump(batch, handle)
    return directory


def drop_from_page_cache(path: Path) -> None:
    """Ask the kernel to forget this file's cached pages, so the next read comes from the disk (this file only)."""
    with open(path, "rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
