"""Higgs input: validated train/test HDF5 (from higgs.convert), scaling statistics over ranks, tf.data, test blocks.

Nothing here loads TensorFlow or Horovod until training asks for them, so `load` checks the files first.

Layout: `features` (N, F) float with attribute `feature_names`, `label` (N,) integer 0 = b / 1 = s, `weight`, and
`event_id`. Training reads each rank's contiguous block through trainlib; the test split is divided into contiguous
blocks covering every row exactly once (evaluation needs no equal step counts).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import h5py
import numpy as np

from higgs.scaling import Moments, mean_and_std, merge, moments
from trainlib.errors import DataFileError
from trainlib.hdf5_files import ArraySpec, FileInfo, iter_block_chunks, validate_files

if TYPE_CHECKING:
    from trainlib.distributed import WorkerContext
    from trainlib.hdf5_input import RankInput

FIX = "convert the challenge CSV with `python -m higgs.convert training.csv <data dir>`"
SPECS = (ArraySpec("features", (None,), kinds="f"), ArraySpec("label", (), kinds="iu"))
CHUNK_ROWS = 8192


@dataclass(frozen=True)
class HiggsData:
    train: FileInfo
    test: FileInfo
    feature_names: tuple[str, ...]

    @property
    def num_features(self) -> int:
        return self.train.row_shapes["features"][0]


def _feature_names(info: FileInfo) -> tuple[str, ...]:
    with h5py.File(info.path, "r") as handle:
        names = handle["features"].attrs.get("feature_names")
        labels = handle["label"]
        for start in range(0, info.rows, 1 << 16):
            values = labels[start : start + (1 << 16)]
            if values.min() < 0 or values.max() > 1:
                raise DataFileError(info.path, f"labels must be 0 (b) or 1 (s), found {values.min()}..{values.max()}",
                                    FIX, "label")
    width = info.row_shapes["features"][0]
    if names is None:
        return tuple(f"feature_{index}" for index in range(width))
    return tuple(str(name.decode() if isinstance(name, bytes) else name) for name in names)


def load(data_dir: str, train_name: str, test_name: str) -> HiggsData:
    """Check both files (same feature columns, labels 0/1) before any training."""
    paths = [os.path.join(data_dir, name) for name in (train_name, test_name)]
    train, test = validate_files(paths, SPECS, FIX)
    names = _feature_names(train)
    if _feature_names(test) != names:
        raise DataFileError(test.path, f"feature_names differ from {train.path}'s", FIX, "features")
    return HiggsData(train=train, test=test, feature_names=names)


def rank_moments(info: FileInfo, rank: int, size: int) -> Moments:
    """Moments of this rank's training block (the rows it will train on), streamed in chunks."""
    parts = [moments(chunk) for (chunk,) in iter_block_chunks([info], ["features"], rank, size, CHUNK_ROWS)]
    if not parts:  # fewer rows than ranks: this rank contributes nothing
        width = info.row_shapes["features"][0]
        return Moments(0.0, np.zeros(width), np.zeros(width))
    return merge(parts)


def scaling_statistics(info: FileInfo, context: WorkerContext) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the training split: per-rank moments summed over ranks (the same result on every rank)."""
    from trainlib import distributed

    local = rank_moments(info, context.rank, context.size)
    return mean_and_std(Moments.from_vector(distributed.allreduce_sum(local.to_vector())))


def training_input(info: FileInfo, mean: np.ndarray, std: np.ndarray, *, rank: int, size: int, batch_size: int,
                   seed: int | None) -> RankInput:
    """Standardised features and one-hot labels (the notebook's categorical cross-entropy targets)."""
    import tensorflow as tf

    from trainlib.hdf5_input import make_dataset

    mean_t, std_t = tf.constant(mean, tf.float32), tf.constant(std, tf.float32)

    def preprocess(features: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return (tf.cast(features, tf.float32) - mean_t) / std_t, tf.one_hot(tf.cast(label, tf.int32), 2)

    return make_dataset([info], ["features", "label"], rank=rank, size=size, batch_size=batch_size, training=True,
                        preprocess=preprocess, seed=seed)


def evaluation_block(rows: int, rank: int, size: int) -> tuple[int, int]:
    """Contiguous [start, stop) of the test rows for `rank`; the blocks of all ranks cover every row once."""
    bounds = np.linspace(0, rows, size + 1).round().astype(int)
    return int(bounds[rank]), int(bounds[rank + 1])


def iter_test_chunks(info: FileInfo, start: int, stop: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(features, labels) chunks of test rows [start, stop)."""
    with h5py.File(info.path, "r") as handle:
        features, labels = handle["features"], handle["label"]
        for chunk_start in range(start, stop, CHUNK_ROWS):
            chunk_stop = min(chunk_start + CHUNK_ROWS, stop)
            yield features[chunk_start:chunk_stop], labels[chunk_start:chunk_stop]
