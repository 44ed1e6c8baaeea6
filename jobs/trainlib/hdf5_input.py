"""HDF5 files -> tf.data: stream each rank's contiguous block of rows (see `hdf5_files`) into a pipeline.

Rows are read `chunk_rows` at a time, so memory stays flat as files grow: at most one chunk plus the shuffle buffer is
held per rank.

Typical use::

    specs = [ArraySpec("images", (None, None, None), dtype="uint8"), ArraySpec("labels", (), kinds="iu")]
    files = validate_files([train_path], specs, fix="convert the data with `python -m cifar_mixup.convert`")
    train = make_dataset(files, ["images", "labels"], rank=ctx.rank, size=ctx.size, batch_size=32, training=True,
                         preprocess=normalize)
    model.fit(train.dataset, steps_per_epoch=train.steps, ...)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from trainlib.errors import TrainingInputError
from trainlib.hdf5_files import (  # re-exported: programs may import the whole input API from here
    ArraySpec,
    FileInfo,
    inspect_file,
    iter_block_chunks,
    rank_block,
    rows_per_rank,
    validate_files,
)

AUTOTUNE = tf.data.AUTOTUNE

__all__ = ["AUTOTUNE", "ArraySpec", "FileInfo", "RankInput", "inspect_file", "iter_block_chunks", "make_dataset",
           "rank_block", "rows_per_rank", "validate_files"]


@dataclass(frozen=True)
class RankInput:
    """One rank's input pipeline: `dataset` repeats forever; run `steps` batches per epoch (equal on every rank)."""

    dataset: tf.data.Dataset
    steps: int
    rows: int


def make_dataset(files: Sequence[FileInfo], names: Sequence[str], *, rank: int, size: int, batch_size: int,
                 training: bool, preprocess: Callable[..., object] | None = None,
                 batch_transform: Callable[..., object] | None = None, shuffle_buffer: int = 4096,
                 chunk_rows: int = 1024, seed: int | None = None) -> RankInput:
    """Build this rank's pipeline over `files`: chunks -> rows -> map(preprocess) -> shuffle -> batch ->
    map(batch_transform) -> repeat -> prefetch, with AUTOTUNE parallelism.

    `preprocess` takes one row's tensors (one per name) and returns the element; `batch_transform` takes a batch of
    elements (e.g. `mixup.apply_mixup`'s function). Training pipelines shuffle and drop the last partial batch;
    evaluation pipelines keep every row in order. Both repeat forever, so pass `steps` to Keras.
    """
    if batch_size < 1:
        raise TrainingInputError(f"--batch-size must be at least 1, got {batch_size}")
    rows = rows_per_rank(files, size)
    steps = rows // batch_size if training else -(-rows // batch_size)
    if steps < 1:
        raise TrainingInputError(
            f"{', '.join(f.path for f in files)}: {rows} rows per rank with {size} ranks is fewer than one batch of "
            f"{batch_size}; use more data, fewer ranks or a smaller --batch-size")
    dtypes = [np.result_type(*(info.dtypes[name] for info in files)) for name in names]
    signature = tuple(tf.TensorSpec((None, *files[0].row_shapes[name]), tf.as_dtype(dtype))
                      for name, dtype in zip(names, dtypes, strict=True))
    rng = np.random.default_rng(None if seed is None else seed + 7919 * rank) if training else None

    def chunks() -> Iterator[tuple[np.ndarray, ...]]:
        for chunk in iter_block_chunks(files, names, rank, size, chunk_rows, rng):
            yield tuple(array.astype(dtype, copy=False) for array, dtype in zip(chunk, dtypes, strict=True))

    dataset = tf.data.Dataset.from_generator(chunks, output_signature=signature).unbatch()
    if preprocess is not None:
        dataset = dataset.map(preprocess, num_parallel_calls=AUTOTUNE, deterministic=not training)
    if training:
        dataset = dataset.shuffle(shuffle_buffer, seed=None if seed is None else seed + rank,
                                  reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=training)
    if batch_transform is not None:
        dataset = dataset.map(batch_transform, num_parallel_calls=AUTOTUNE, deterministic=not training)
    dataset = dataset.repeat().prefetch(AUTOTUNE)
    return RankInput(dataset=dataset, steps=steps, rows=rows)
