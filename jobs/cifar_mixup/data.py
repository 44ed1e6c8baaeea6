"""cifar_mixup's HDF5 layout and preprocessing.

`<data-dir>/train.h5` and `<data-dir>/test.h5`, each with datasets `images` (N, H, W, C) uint8 and `labels` (N,)
integer class ids in [0, num_classes). Write them with `python -m cifar_mixup.convert`.
"""

from __future__ import annotations

import os

import h5py
import numpy as np

from trainlib.errors import DataFileError
from trainlib.hdf5_files import ArraySpec, FileInfo, validate_files

IMAGES = "images"
LABELS = "labels"
SPECS = [ArraySpec(IMAGES, (None, None, None), dtype="uint8"), ArraySpec(LABELS, (), kinds="iu")]
# How uint8 pixels become the network's input: x * scale + shift. symmetric: [-1, 1]; notebook: the notebook's
# x / 255 * 2 - 2, i.e. [-2, 0] (shifted by one from the usual [-1, 1], which the batch norm after the first
# convolution mostly absorbs).
INPUT_SCALING = {"symmetric": (1 / 127.5, -1.0), "notebook": (2 / 255, -2.0)}
FIX = "write the files with `python -m cifar_mixup.convert cifar10|digits --out <data-dir>`"


def data_files(data_dir: str) -> tuple[str, str]:
    """Paths of the training and held-out files in `data_dir`."""
    return os.path.join(data_dir, "train.h5"), os.path.join(data_dir, "test.h5")


def check_labels(info: FileInfo, num_classes: int, chunk_rows: int = 65536) -> None:
    """Every label must be a class id in [0, num_classes); read in chunks so memory stays flat."""
    with h5py.File(info.path, "r") as handle:
        labels = handle[LABELS]
        for start in range(0, info.rows, chunk_rows):
            chunk = labels[start:start + chunk_rows]
            low, high = int(chunk.min()), int(chunk.max())
            if low < 0 or high >= num_classes:
                raise DataFileError(info.path, f"labels must lie in [0, {num_classes}), found {low}..{high}",
                                    f"pass --num-classes or {FIX}", LABELS)


def validate_data(data_dir: str, num_classes: int) -> tuple[FileInfo, FileInfo]:
    """Check both files before training (shapes, dtypes, readable rows, label range); returns their descriptions."""
    train, test = validate_files(list(data_files(data_dir)), SPECS, FIX)
    if train.row_shapes[IMAGES][-1] not in (1, 3, 4):
        raise DataFileError(train.path, f"images need 1, 3 or 4 channels last, found shape (N, "
                            f"{', '.join(map(str, train.row_shapes[IMAGES]))})", FIX, IMAGES)
    for info in (train, test):
        check_labels(info, num_classes)
    return train, test


def scale_images(images: np.ndarray, scaling: str = "symmetric") -> np.ndarray:
    """uint8 [0, 255] -> float32 as `INPUT_SCALING[scaling]` (the numpy twin of `preprocess`, for checks outside
    TensorFlow)."""
    scale, shift = INPUT_SCALING[scaling]
    return (images.astype(np.float32) * scale + shift).astype(np.float32)
