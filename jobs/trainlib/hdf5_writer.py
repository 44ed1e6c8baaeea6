"""Write HDF5 data files for the programs: append rows in batches, publish atomically.

Converters stream their source into `HDF5Writer` a batch at a time (memory stays flat), and the file appears under its
final name only once complete (temporary name, fsync, rename), so a half-written file is never mistaken for data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType

import h5py
import numpy as np


class HDF5Writer:
    """Context manager: `with HDF5Writer(path, {"images": ((32, 32, 3), "uint8"), "labels": ((), "int64")}) as out:
    out.append(images=..., labels=...)`. Every append must give all datasets the same number of rows."""

    def __init__(self, path: str, layout: Mapping[str, tuple[tuple[int, ...], str]], chunk_rows: int = 1024,
                 attrs: Mapping[str, object] | None = None) -> None:
        self.path = path
        self.layout = dict(layout)
        self.chunk_rows = chunk_rows
        self.attrs = dict(attrs or {})
        self.rows = 0
        self._temporary = f"{path}.{os.getpid()}.tmp"
        self._handle: h5py.File | None = None

    def __enter__(self) -> HDF5Writer:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._handle = h5py.File(self._temporary, "w")
        for name, value in self.attrs.items():
            self._handle.attrs[name] = value
        for name, (row_shape, dtype) in self.layout.items():
            self._handle.create_dataset(name, shape=(0, *row_shape), maxshape=(None, *row_shape), dtype=dtype,
                                        chunks=(self.chunk_rows, *row_shape))
        return self

    def append(self, **arrays: np.ndarray) -> None:
        """Add the same number of rows to every dataset."""
        assert self._handle is not None, "use HDF5Writer as a context manager"
        if set(arrays) != set(self.layout):
            raise ValueError(f"append needs exactly {sorted(self.layout)}, got {sorted(arrays)}")
        counts = {name: len(array) for name, array in arrays.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(f"append needs equal row counts, got {counts}")
        count = next(iter(counts.values()))
        for name, array in arrays.items():
            dataset = self._handle[name]
            dataset.resize(self.rows + count, axis=0)
            dataset[self.rows:self.rows + count] = array
        self.rows += count

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        assert self._handle is not None
        self._handle.close()
        if kind is not None:
            os.remove(self._temporary)
            return
        with open(self._temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(self._temporary, self.path)
