"""HDF5 data files: validate them before training, and read each rank's contiguous block of rows in chunks.

Every rank reads rows `[rank * k, (rank + 1) * k)` of each file, where `k = rows // size`, so all ranks see the same
number of rows (Horovod needs equal steps per rank; up to `size - 1` trailing rows per file are skipped) and each rank's
reads are one contiguous range per file. This module needs only h5py and numpy, so a program can reject bad files
before TensorFlow loads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from trainlib.errors import DataFileError, TrainingInputError


@dataclass(frozen=True)
class ArraySpec:
    """What one HDF5 dataset must look like.

    `row_shape` is the shape of one row (the dataset's shape without its leading N); `None` accepts any size in that
    position. `dtype`, when given, must match exactly (e.g. "uint8"); otherwise the dtype's numpy kind must be one of
    `kinds` ('u' unsigned int, 'i' signed int, 'f' float, 'b' bool).
    """

    name: str
    row_shape: tuple[int | None, ...] = ()
    dtype: str | None = None
    kinds: str = "iuf"

    def describe(self) -> str:
        dims = ", ".join(["N"] + ["*" if d is None else str(d) for d in self.row_shape])
        wanted = self.dtype or "/".join({"u": "uint", "i": "int", "f": "float", "b": "bool"}[k] for k in self.kinds)
        return f"shape ({dims}) and dtype {wanted}"

    def accepts(self, shape: tuple[int, ...], dtype: np.dtype) -> bool:
        row = shape[1:]
        if len(shape) < 1 or len(row) != len(self.row_shape):
            return False
        if any(want is not None and want != got for want, got in zip(self.row_shape, row, strict=True)):
            return False
        return dtype == np.dtype(self.dtype) if self.dtype else dtype.kind in self.kinds


@dataclass(frozen=True)
class FileInfo:
    """A validated HDF5 file: its row count and, per dataset, the row shape and dtype found."""

    path: str
    rows: int
    row_shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, np.dtype]


def _found(shape: tuple[int, ...], dtype: np.dtype) -> str:
    return f"shape {tuple(shape)} and dtype {dtype}"


def _open_failure(message: str) -> str:
    """h5py's open error in plain words, e.g. 'truncated: 2464 of 4928 bytes present'."""
    truncated = re.search(r"truncated file: eof = (\d+).*stored_eof = (\d+)", message)
    if truncated:
        return f"truncated: {truncated.group(1)} of {truncated.group(2)} bytes present"
    if "file signature not found" in message:
        return "corrupt or not HDF5: no HDF5 signature"
    detail = re.search(r"\(([^()]*)\)\s*$", message)
    return f"truncated or corrupt: {detail.group(1) if detail else message}"


def inspect_file(path: str, specs: Sequence[ArraySpec], fix: str) -> FileInfo:
    """Open `path` and check every dataset in `specs`; raise `DataFileError` naming file, dataset and fix."""
    if not os.path.exists(path):
        raise DataFileError(path, "file not found", fix)
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise DataFileError(path, f"not a readable HDF5 file ({_open_failure(str(error))})", fix) from None
    with handle:
        rows: int | None = None
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, np.dtype] = {}
        for spec in specs:
            node = handle.get(spec.name)
            if not isinstance(node, h5py.Dataset):
                present = ", ".join(sorted(handle.keys())) or "none"
                raise DataFileError(path, f"missing dataset (expected {spec.describe()}; datasets present: {present})",
                                    fix, spec.name)
            if not spec.accepts(node.shape, node.dtype):
                raise DataFileError(path, f"expected {spec.describe()}, found {_found(node.shape, node.dtype)}",
                                    fix, spec.name)
            if node.shape[0] == 0:
                raise DataFileError(path, "dataset has no rows", fix, spec.name)
            if rows is not None and node.shape[0] != rows:
                first = specs[0].name
                raise DataFileError(path, f"has {node.shape[0]} rows but '{first}' has {rows}", fix, spec.name)
            try:  # reading the first and last rows catches files cut short inside the data
                node[:1]
                node[-1:]
            except (OSError, RuntimeError) as error:
                raise DataFileError(path, f"rows cannot be read (truncated or corrupt: {error})", fix,
                                    spec.name) from None
            rows = int(node.shape[0])
            shapes[spec.name] = tuple(int(d) for d in node.shape[1:])
            dtypes[spec.name] = node.dtype
    return FileInfo(path=path, rows=rows or 0, row_shapes=shapes, dtypes=dtypes)


def validate_files(paths: Sequence[str], specs: Sequence[ArraySpec], fix: str) -> list[FileInfo]:
    """Check every file before training starts; all files must agree on row shapes (dtypes may differ in width).

    `fix` is the one-line remedy appended to every message (e.g. which converter to run).
    """
    if not paths:
        raise TrainingInputError(f"no data files given; {fix}")
    infos = [inspect_file(path, specs, fix) for path in paths]
    first = infos[0]
    for info in infos[1:]:
        for spec in specs:
            if info.row_shapes[spec.name] != first.row_shapes[spec.name]:
                raise DataFileError(info.path, f"rows have shape {info.row_shapes[spec.name]} but {first.path} has "
                                    f"{first.row_shapes[spec.name]}", fix, spec.name)
    return infos


def rank_block(rows: int, rank: int, size: int) -> tuple[int, int]:
    """The contiguous `[start, stop)` rows rank `rank` of `size` reads from a file of `rows` rows (equal lengths)."""
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"rank {rank} is outside 0..{size - 1}")
    per_rank = rows // size
    return rank * per_rank, (rank + 1) * per_rank


def rows_per_rank(files: Sequence[FileInfo], size: int) -> int:
    """Rows every rank reads per pass over `files` (the same on every rank)."""
    return sum(info.rows // size for info in files)


def iter_block_chunks(files: Sequence[FileInfo], names: Sequence[str], rank: int, size: int, chunk_rows: int = 1024,
                      rng: np.random.Generator | None = None, part: int = 0,
                      parts: int = 1) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield `(array_per_name...)` chunks of at most `chunk_rows` rows of this rank's block of every file.

    With `rng`, files and chunks come in a random order (rows inside a chunk stay contiguous); without, in file order.
    With `parts` > 1, only every `parts`-th chunk of each file's block, from the `part`-th on: `parts` readers, one
    per part, read the block once between them.
    """
    if not 0 <= part < parts:
        raise ValueError(f"part {part} is outside 0..{parts - 1}")
    file_order = rng.permutation(len(files)) if rng is not None else range(len(files))
    for index in file_order:
        info = files[index]
        start, stop = rank_block(info.rows, rank, size)
        starts = np.arange(start, stop, chunk_rows)[part::parts]
        if rng is not None:
            starts = rng.permutation(starts)
        with h5py.File(info.path, "r") as handle:
            datasets = [handle[name] for name in names]
            for chunk_start in starts:
                chunk_stop = min(int(chunk_start) + chunk_rows, stop)
                yield tuple(dataset[int(chunk_start):chunk_stop] for dataset in datasets)
