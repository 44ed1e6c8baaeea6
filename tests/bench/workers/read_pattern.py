"""Read one rank's share of an HDF5 dataset, either as trainlib does (a contiguous block, in chunks) or strided
(`[rank::size]`), and report the seconds taken. h5py only, so the process starts fast.

    python -m tests.bench.workers.read_pattern --data big.h5 --rank 0 --size 2 --pattern strided --out r0.json
"""

from __future__ import annotations

import argparse
import time

import h5py

from tests.bench.workers.common import write_result
from trainlib.hdf5_files import ArraySpec, inspect_file, iter_block_chunks

DATASET = "images"


def read_contiguous(path: str, rank: int, size: int, chunk_rows: int) -> int:
    """trainlib's reader: this rank's block `[rank * k, (rank + 1) * k)`, `chunk_rows` rows per read."""
    info = inspect_file(path, [ArraySpec(DATASET, (None, None, None))], fix="rewrite the benchmark file")
    return sum(chunk.nbytes for (chunk,) in iter_block_chunks([info], [DATASET], rank, size, chunk_rows))


def read_strided(path: str, rank: int, size: int, chunk_rows: int) -> int:
    """Every size-th row from `rank` on, `chunk_rows` rows per read (an HDF5 hyperslab with a stride)."""
    total = 0
    with h5py.File(path, "r") as handle:
        dataset = handle[DATASET]
        rows = dataset.shape[0] // size * size
        span = chunk_rows * size
        for start in range(rank, rows, span):
            total += dataset[start:min(start + span, rows):size].nbytes
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--pattern", choices=("contiguous", "strided"), required=True)
    parser.add_argument("--chunk-rows", type=int, default=1024, help="rows per read (trainlib's default: 1024)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    reader = read_contiguous if args.pattern == "contiguous" else read_strided
    start = time.perf_counter()
    read_bytes = reader(args.data, args.rank, args.size, args.chunk_rows)
    write_result(args.out, {"seconds": time.perf_counter() - start, "bytes": read_bytes, "pattern": args.pattern})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
