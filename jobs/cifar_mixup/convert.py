"""Write cifar_mixup's HDF5 files from public image data sets.

    python -m cifar_mixup.convert cifar10 --source cifar-10-batches-py --out /data/cifar10
    python -m cifar_mixup.convert digits --out /data/digits

`cifar10` reads the CIFAR-10 "python version" (the directory `cifar-10-batches-py`, or the `cifar-10-python.tar.gz`
archive itself): pickled dicts `data_batch_1..5` and `test_batch` with b"data" (N, 3072) uint8 -- 1024 red, then
1024 green, then 1024 blue values, each a 32x32 image row by row -- and b"labels" (N,) ints. `digits` writes
scikit-learn's bundled 8x8 handwritten digits (1797 real images), split into train and held-out sets.
Both write `train.h5` and `test.h5` with `images` (N, H, W, C) uint8 and `labels` (N,) int64, batch by batch.
"""

from __future__ import annotations

import argparse
import os
import pickle
import tarfile
from collections.abc import Iterator, Sequence

import numpy as np

from cifar_mixup.data import IMAGES, LABELS, data_files
from trainlib.cli import run_main
from trainlib.errors import TrainingInputError
from trainlib.hdf5_writer import HDF5Writer

TRAIN_BATCHES = [f"data_batch_{index}" for index in range(1, 6)]
TEST_BATCHES = ["test_batch"]
CIFAR_SIDE = 32


def cifar_rows_to_images(rows: np.ndarray) -> np.ndarray:
    """(N, 3072) channel-planar rows -> (N, 32, 32, 3) channels-last images."""
    return rows.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE).transpose(0, 2, 3, 1)


def images_to_cifar_rows(images: np.ndarray) -> np.ndarray:
    """(N, 32, 32, 3) images -> (N, 3072) rows in the CIFAR-10 python layout (the inverse of the above)."""
    return images.transpose(0, 3, 1, 2).reshape(len(images), -1)


def _read_batch(source: str, name: str) -> dict:
    if os.path.isdir(source):
        path = os.path.join(source, name)
        if not os.path.exists(path):
            raise TrainingInputError(f"{path}: CIFAR-10 batch not found; point --source at the extracted "
                                     "cifar-10-batches-py directory (or the cifar-10-python.tar.gz archive)")
        with open(path, "rb") as handle:
            return pickle.load(handle, encoding="bytes")
    with tarfile.open(source, "r:*") as archive:
        member = next((m for m in archive.getmembers() if os.path.basename(m.name) == name), None)
        if member is None:
            raise TrainingInputError(f"{source}: archive has no {name}; use the CIFAR-10 python version archive")
        extracted = archive.extractfile(member)
        assert extracted is not None
        return pickle.load(extracted, encoding="bytes")


def read_cifar_batches(source: str, names: Sequence[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (images (N, 32, 32, 3) uint8, labels (N,) int64) per batch file, checking the format as it goes."""
    if not os.path.exists(source):
        raise TrainingInputError(f"{source}: not found; pass --source <cifar-10-batches-py directory or archive>")
    for name in names:
        batch = _read_batch(source, name)
        data, labels = batch.get(b"data"), batch.get(b"labels")
        if data is None or labels is None:
            raise TrainingInputError(f"{source}/{name}: expected a dict with b'data' and b'labels', found keys "
                                     f"{sorted(batch)}; is this the CIFAR-10 python version?")
        data = np.asarray(data)
        labels = np.asarray(labels, dtype=np.int64)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * CIFAR_SIDE * CIFAR_SIDE:
            raise TrainingInputError(f"{source}/{name}: b'data' must be (N, 3072) uint8, found {data.shape} "
                                     f"{data.dtype}")
        if len(labels) != len(data):
            raise TrainingInputError(f"{source}/{name}: {len(data)} images but {len(labels)} labels")
        yield cifar_rows_to_images(data), labels


def convert_cifar10(source: str, out_dir: str) -> tuple[int, int]:
    """Write train.h5 (data_batch_1..5) and test.h5 (test_batch); returns the row counts."""
    counts = []
    layout = {IMAGES: ((CIFAR_SIDE, CIFAR_SIDE, 3), "uint8"), LABELS: ((), "int64")}
    for path, names in zip(data_files(out_dir), (TRAIN_BATCHES, TEST_BATCHES), strict=True):
        with HDF5Writer(path, layout, attrs={"source": "CIFAR-10 python version"}) as writer:
            for images, labels in read_cifar_batches(source, names):
                writer.append(**{IMAGES: images, LABELS: labels})
        counts.append(writer.rows)
    return counts[0], counts[1]


def digits_split(test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 (N, 8, 8, 1) images, split stratified into train and held-out sets."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)[..., np.newaxis]
    labels = digits.target.astype(np.int64)
    train_x, test_x, train_y, test_y = train_test_split(images, labels, test_size=test_fraction,
                                                        random_state=seed, stratify=labels)
    return train_x, train_y, test_x, test_y


def convert_digits(out_dir: str, test_fraction: float = 0.2, seed: int = 0) -> tuple[int, int]:
    """Write digits train.h5 / test.h5; returns the row counts."""
    if not 0 < test_fraction < 1:
        raise TrainingInputError(f"--test-fraction must lie strictly between 0 and 1, got {test_fraction}")
    train_x, train_y, test_x, test_y = digits_split(test_fraction, seed)
    layout = {IMAGES: ((8, 8, 1), "uint8"), LABELS: ((), "int64")}
    for path, images, labels in zip(data_files(out_dir), (train_x, test_x), (train_y, test_y), strict=True):
        with HDF5Writer(path, layout, attrs={"source": "scikit-learn digits"}) as writer:
            writer.append(**{IMAGES: images, LABELS: labels})
    return len(train_y), len(test_y)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cifar_mixup.convert", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="dataset", required=True)
    cifar = commands.add_parser("cifar10", help="CIFAR-10 python batches -> HDF5")
    cifar.add_argument("--source", required=True, help="cifar-10-batches-py directory or cifar-10-python.tar.gz")
    cifar.add_argument("--out", required=True, help="directory for train.h5 and test.h5")
    digits = commands.add_parser("digits", help="scikit-learn's 8x8 digits -> HDF5")
    digits.add_argument("--out", required=True, help="directory for train.h5 and test.h5")
    digits.add_argument("--test-fraction", type=float, default=0.2, help="held-out share (default: 0.2)")
    digits.add_argument("--seed", type=int, default=0, help="split seed (default: 0)")
    args = parser.parse_args(argv)
    if args.dataset == "cifar10":
        train_rows, test_rows = convert_cifar10(args.source, args.out)
    else:
        train_rows, test_rows = convert_digits(args.out, args.test_fraction, args.seed)
    train_path, test_path = data_files(args.out)
    print(f"wrote {train_path} ({train_rows} images) and {test_path} ({test_rows} images)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, "cifar_mixup.convert"))
