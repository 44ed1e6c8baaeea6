"""Each rank's tf.data pipeline over HDF5: own contiguous rows, equal steps, map/shuffle/batch/repeat."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import tensorflow as tf

from trainlib.errors import TrainingInputError
from trainlib.hdf5_input import ArraySpec, make_dataset, validate_files

SPECS = [ArraySpec("x", (2,), kinds="f"), ArraySpec("index", (), kinds="iu")]


@pytest.fixture
def files(tmp_path):
    """Two files of 23 and 10 rows; `index` numbers every row globally, x = [index, -index]."""
    paths, start = [], 0
    for number, rows in enumerate((23, 10)):
        index = np.arange(start, start + rows)
        with h5py.File(tmp_path / f"{number}.h5", "w") as handle:
            handle["x"] = np.stack([index, -index], axis=1).astype(np.float32)
            handle["index"] = index.astype(np.int32 if number else np.int64)  # dtypes may differ in width
        paths.append(str(tmp_path / f"{number}.h5"))
        start += rows
    return validate_files(paths, SPECS, "regenerate")


def epoch_indices(pipeline, steps: int) -> list[int]:
    indices = []
    for _, index in pipeline.dataset.take(steps):
        indices.extend(index.numpy().tolist())
    return indices


def test_evaluation_pipeline_reads_each_ranks_own_contiguous_rows_once(files):
    seen = []
    for rank in range(3):
        pipeline = make_dataset(files, ["x", "index"], rank=rank, size=3, batch_size=4, training=False)
        assert pipeline.rows == 7 + 3 and pipeline.steps == 3
        seen.append(epoch_indices(pipeline, pipeline.steps))
    # file 0: 23 rows -> 7 per rank (rows 21, 22 unused); file 1: rows 23..32 -> 3 per rank (row 32 unused)
    assert seen == [[0, 1, 2, 3, 4, 5, 6, 23, 24, 25], [7, 8, 9, 10, 11, 12, 13, 26, 27, 28],
                    [14, 15, 16, 17, 18, 19, 20, 29, 30, 31]]


def test_training_pipeline_shuffles_within_the_block_with_equal_steps_and_fresh_order(files):
    pipeline = make_dataset(files, ["x", "index"], rank=1, size=2, batch_size=4, training=True, chunk_rows=3, seed=5)
    assert pipeline.rows == 11 + 5 and pipeline.steps == 4  # drop the remainder: every rank runs 4 steps
    block = set(range(11, 22)) | set(range(28, 33))
    first, second = epoch_indices(pipeline, 4), epoch_indices(make_dataset(
        files, ["x", "index"], rank=1, size=2, batch_size=4, training=True, chunk_rows=3, seed=6), 4)
    assert len(first) == 16 and set(first) == block and first != sorted(first)
    assert first != second
    batches = list(pipeline.dataset.take(8))
    assert all(x.shape == (4, 2) for x, _ in batches), "full batches only, repeating past the epoch"


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_readers_share_the_block_each_row_once_per_pass_and_a_seed_repeats_the_order(files, readers):
    def two_epochs(seed: int) -> list[int]:
        pipeline = make_dataset(files, ["x", "index"], rank=0, size=1, batch_size=3, training=True, chunk_rows=4,
                                seed=seed, readers=readers)
        assert pipeline.steps == 11
        return epoch_indices(pipeline, 2 * pipeline.steps)

    order = two_epochs(5)
    assert sorted(order[:33]) == sorted(order[33:]) == list(range(33)), "every row once per epoch, epochs aligned"
    assert order[:33] != order[33:], "a fresh order every pass"
    assert two_epochs(5) == order and two_epochs(6) != order


def test_preprocess_and_batch_transform_run_in_the_pipeline(files):
    pipeline = make_dataset(files, ["x", "index"], rank=0, size=1, batch_size=5, training=False,
                            preprocess=lambda x, index: (x * 2.0, index),
                            batch_transform=lambda x, index: (x, tf.fill(tf.shape(index), tf.shape(x)[0])))
    x, sizes = next(iter(pipeline.dataset))
    np.testing.assert_allclose(x.numpy()[:, 0], [0, 2, 4, 6, 8])
    assert sizes.numpy().tolist() == [5] * 5


def test_too_few_rows_for_one_batch_is_an_input_error(files):
    with pytest.raises(TrainingInputError, match=r"10 rows per rank with 3 ranks is fewer than one batch of 64"):
        make_dataset(files, ["x", "index"], rank=0, size=3, batch_size=64, training=True)
