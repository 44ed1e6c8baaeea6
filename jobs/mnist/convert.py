"""Write mnist's HDF5 files from the MNIST IDX files.

    python -m mnist.convert --source /downloads/mnist --out /data/mnist

`--source` holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, each optionally gzip-compressed (`.gz`). Writes `train.h5` and `test.h5` with `images`
(N, 28, 28) uint8 and `labels` (N,) int64, streaming 10000 rows at a time.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from mnist.data import IMAGES, LABELS, data_files
from mnist.idx import IMAGES_MAGIC, LABELS_MAGIC, iter_idx, open_idx, read_header
from trainlib.cli import run_main
from trainlib.errors import TrainingInputError
from trainlib.hdf5_writer import HDF5Writer

SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def find_idx(source: str, name: str) -> str:
    """The path of `name` or `name.gz` in `source`."""
    for candidate in (name, f"{name}.gz"):
        path = os.path.join(source, candidate)
        if os.path.exists(path):
            return path
    raise TrainingInputError(f"{os.path.join(source, name)}[.gz]: not found; --source must hold the four MNIST "
                             "IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...)")


def convert_split(images_path: str, labels_path: str, out_path: str, chunk_rows: int = 10000) -> int:
    """Stream one images/labels pair of IDX files into one HDF5 file; returns the row count."""
    with open_idx(images_path) as handle:
        image_dims = read_header(handle, images_path, IMAGES_MAGIC)
    with open_idx(labels_path) as handle:
        label_dims = read_header(handle, labels_path, LABELS_MAGIC)
    if image_dims[0] != label_dims[0]:
        raise TrainingInputError(f"{images_path} has {image_dims[0]} images but {labels_path} has {label_dims[0]} "
                                 "labels; use files from the same split")
    layout = {IMAGES: (tuple(image_dims[1:]), "uint8"), LABELS: ((), "int64")}
    with HDF5Writer(out_path, layout, attrs={"source": "MNIST IDX"}) as writer:
        for images, labels in zip(iter_idx(images_path, IMAGES_MAGIC, chunk_rows),
                                  iter_idx(labels_path, LABELS_MAGIC, chunk_rows), strict=True):
            writer.append(**{IMAGES: images, LABELS: labels.astype("int64")})
    return writer.rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mnist.convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="directory with the four MNIST IDX files (optionally .gz)")
    parser.add_argument("--out", required=True, help="directory for train.h5 and test.h5")
    args = parser.parse_args(argv)
    for (split, (images_name, labels_name)), out_path in zip(SPLITS.items(), data_files(args.out), strict=True):
        rows = convert_split(find_idx(args.source, images_name), find_idx(args.source, labels_name), out_path)
        print(f"wrote {out_path} ({rows} {split} images)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, "mnist.convert"))
