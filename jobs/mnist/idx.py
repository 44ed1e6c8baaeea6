"""The IDX file format of the MNIST distribution (train-images-idx3-ubyte etc., optionally gzip-compressed).

Big-endian header: a magic number (0x00000803 = 2051 for images, 0x00000801 = 2049 for labels: two zero bytes, the
type code 0x08 = unsigned byte, the number of dimensions), then one uint32 per dimension, then the uint8 values row by
row.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from trainlib.errors import TrainingInputError

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049


def open_idx(path: str) -> BinaryIO:
    """Open an IDX file, transparently un-gzipping `.gz` files."""
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # type: ignore[return-value]


def read_header(handle: BinaryIO, path: str, magic: int) -> tuple[int, ...]:
    """Check the magic number and return the dimensions (N, ...)."""
    head = handle.read(4)
    if len(head) < 4:
        raise TrainingInputError(f"{path}: too short for an IDX header; is this an MNIST IDX file?")
    found = struct.unpack(">I", head)[0]
    if found != magic:
        raise TrainingInputError(f"{path}: IDX magic number {found}, expected {magic} "
                                 f"({'images' if magic == IMAGES_MAGIC else 'labels'}); check the file names")
    rank = magic & 0xFF
    raw = handle.read(4 * rank)
    if len(raw) < 4 * rank:
        raise TrainingInputError(f"{path}: truncated IDX header")
    return struct.unpack(f">{rank}I", raw)


def iter_idx(path: str, magic: int, chunk_rows: int = 10000) -> Iterator[np.ndarray]:
    """Yield the rows of an IDX file as uint8 arrays of at most `chunk_rows` rows (memory stays flat)."""
    with open_idx(path) as handle:
        dims = read_header(handle, path, magic)
        row_shape, row_bytes = dims[1:], int(np.prod(dims[1:], dtype=np.int64))
        remaining = dims[0]
        while remaining:
            count = min(chunk_rows, remaining)
            raw = handle.read(count * row_bytes)
            if len(raw) < count * row_bytes:
                raise TrainingInputError(f"{path}: truncated: header promises {dims[0]} rows, data ends after "
                                         f"{dims[0] - remaining + len(raw) // max(row_bytes, 1)}")
            yield np.frombuffer(raw, dtype=np.uint8).reshape(count, *row_shape)
            remaining -= count


def write_idx(path: str, array: np.ndarray) -> None:
    """Write a uint8 array as IDX (images if 3-D, labels if 1-D); gzip when `path` ends in .gz."""
    data = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">I", 0x0800 | data.ndim) + struct.pack(f">{data.ndim}I", *data.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header)
        handle.write(data.tobytes())
