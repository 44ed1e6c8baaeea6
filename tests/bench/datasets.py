"""CIFAR-shaped HDF5 files for the benchmarks, written with trainlib's own writer (the layout cifar_mixup.convert
writes: images (N, 32, 32, 3) uint8, labels (N,) int64, 1024-row chunks). Pixels and labels are random: these files
measure speed and memory, never accuracy."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trainlib.hdf5_writer import HDF5Writer

IMAGE_SHAPE = (32, 32, 3)
NUM_CLASSES = 10
WRITE_ROWS = 4096


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


def drop_from_page_cache(path: Path) -> None:
    """Ask the kernel to forget this file's cached pages, so the next read comes from the disk (this file only)."""
    with open(path, "rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
