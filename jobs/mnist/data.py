"""mnist's HDF5 layout: `<data-dir>/train.h5` and `test.h5` with `images` (N, H, W) uint8 and `labels` (N,) ints."""

from __future__ import annotations

import os

from trainlib.errors import DataFileError
from trainlib.hdf5_files import ArraySpec, FileInfo, validate_files

IMAGES = "images"
LABELS = "labels"
NUM_CLASSES = 10
SPECS = [ArraySpec(IMAGES, (None, None), dtype="uint8"), ArraySpec(LABELS, (), kinds="iu")]
FIX = "write the files with `python -m mnist.convert --source <dir with the MNIST IDX files> --out <data-dir>`"


def data_files(data_dir: str) -> tuple[str, str]:
    """Paths of the training and held-out files in `data_dir`."""
    return os.path.join(data_dir, "train.h5"), os.path.join(data_dir, "test.h5")


def validate_data(data_dir: str) -> tuple[FileInfo, FileInfo]:
    """Check both files before training; returns their descriptions."""
    train, test = validate_files(list(data_files(data_dir)), SPECS, FIX)
    if min(train.row_shapes[IMAGES]) < 1:
        raise DataFileError(train.path, f"images have an empty side {train.row_shapes[IMAGES]}", FIX, IMAGES)
    return train, test
