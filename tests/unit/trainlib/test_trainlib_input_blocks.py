"""The HDF5 pipeline's whole-array steps: blocks in order, blocks shuffled through a buffer, one vectorised call per
batch for preprocessing and the batch transform."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from trainlib.hdf5_input import ShuffleBuffer, batch_function, ordered_blocks, shuffled_blocks


def numbered_chunks(rows: int, chunk_rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Chunks of (row number, row number * 10) columns, as `iter_block_chunks` yields them."""
    index = np.arange(rows)
    return [(index[start:start + chunk_rows], index[start:start + chunk_rows] * 10)
            for start in range(0, rows, chunk_rows)]


def test_ordered_blocks_keep_every_row_in_order_across_chunks_with_the_rest_last():
    blocks = list(ordered_blocks(numbered_chunks(23, 5), block_rows=8))
    assert [len(first) for first, _ in blocks] == [8, 8, 7]
    assert np.concatenate([first for first, _ in blocks]).tolist() == list(range(23))
    assert all((second == first * 10).all() for first, second in blocks), "columns stay aligned"


def test_shuffled_blocks_give_each_row_once_in_whole_blocks_with_the_rest_last():
    blocks = list(shuffled_blocks(numbered_chunks(100, 7), block_rows=12, buffer_rows=20,
                                  rng=np.random.default_rng(0)))
    assert [len(first) for first, _ in blocks] == [12] * 8 + [4]
    rows = np.concatenate([first for first, _ in blocks])
    assert len(rows) == 100 and sorted(rows.tolist()) == list(range(100))
    assert rows.tolist() != list(range(100))
    assert all((second == first * 10).all() for first, second in blocks), "columns stay aligned"


def test_the_first_block_draws_from_the_whole_buffer_not_the_first_chunk():
    first, _ = next(shuffled_blocks(numbered_chunks(1000, 10), block_rows=8, buffer_rows=100,
                                    rng=np.random.default_rng(1)))
    assert first.max() >= 50, "rows from later chunks reach the first batch, as with Dataset.shuffle(100)"


def test_the_same_seed_gives_the_same_order_and_another_seed_another():
    def order(seed: int) -> list[int]:
        blocks = shuffled_blocks(numbered_chunks(64, 8), 16, 16, np.random.default_rng(seed))
        return np.concatenate([first for first, _ in blocks]).tolist()

    assert order(3) == order(3) and order(3) != order(4)


def test_a_shuffle_buffer_take_removes_exactly_the_rows_it_returns():
    buffer = ShuffleBuffer((np.arange(10),), capacity=16, rng=np.random.default_rng(2))
    buffer.add((np.arange(10, 14),))
    (taken,) = buffer.take(6)
    (rest,) = buffer.take(len(buffer))
    assert len(buffer) == 0 and len(taken) == 6
    assert sorted(taken.tolist() + rest.tolist()) == list(range(14))


def test_batch_function_runs_a_row_preprocess_on_the_batch_then_the_transform():
    def preprocess(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(image, tf.float32) / 2.0, tf.one_hot(label, 3)

    def transform(images: tf.Tensor, labels: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"images": images + 1.0, "labels": labels}

    images = tf.constant(np.arange(24, dtype=np.uint8).reshape(4, 3, 2))
    labels = tf.constant([0, 2, 1, 2])
    out = batch_function(preprocess, transform)(images, labels)
    np.testing.assert_allclose(out["images"].numpy(), np.arange(24).reshape(4, 3, 2) / 2.0 + 1.0)
    np.testing.assert_allclose(out["labels"].numpy(), np.eye(3)[[0, 2, 1, 2]])
    assert batch_function(None, None)(images, labels)[1] is labels
