"""The MNIST IDX reader/writer: big-endian header, gzip, streaming in chunks."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mnist.idx import IMAGES_MAGIC, LABELS_MAGIC, iter_idx, write_idx
from trainlib.errors import TrainingInputError


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_write_then_stream_in_chunks(tmp_path, name):
    images = np.random.default_rng(0).integers(0, 256, (25, 28, 28), dtype=np.uint8)
    path = str(tmp_path / name)
    write_idx(path, images)
    chunks = list(iter_idx(path, IMAGES_MAGIC, chunk_rows=10))
    assert [len(chunk) for chunk in chunks] == [10, 10, 5]
    np.testing.assert_array_equal(np.concatenate(chunks), images)


def test_header_is_the_public_big_endian_layout(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(str(path), np.array([7, 2, 1], np.uint8))
    assert path.read_bytes() == struct.pack(">II", 2049, 3) + bytes([7, 2, 1])
    assert next(iter_idx(str(path), LABELS_MAGIC)).tolist() == [7, 2, 1]


def test_wrong_kind_of_file_is_named(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(str(path), np.zeros(3, np.uint8))
    with pytest.raises(TrainingInputError, match=r"labels-idx1-ubyte: IDX magic number 2049, expected 2051"):
        list(iter_idx(str(path), IMAGES_MAGIC))
