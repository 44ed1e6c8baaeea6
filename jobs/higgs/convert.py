"""Convert the Higgs challenge CSV into shuffled train/test HDF5 files.

    python -m higgs.convert training.csv /data/higgs [--test-fraction 0.3] [--seed 0]

Writes `<out>/train.h5` and `<out>/test.h5`, each with
`features` (N, F) float32 (attribute `feature_names`: the DER_*/PRI_* columns in CSV order),
`label` (N,) uint8 (0 = b background, 1 = s signal), `weight` (N,) float32 (1.0 when the CSV has no Weight column),
`event_id` (N,) int64. Rows are shuffled with the seed, then split like the notebook's `randomSplit([0.7, 0.3])`.
Scaling is not applied here: the training program standardises with statistics of the training split.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from higgs.columns import EVENT_ID, FEATURE_PREFIXES, LABEL, LABEL_INDEX, LABEL_NAMES, WEIGHT
from trainlib.cli import run_main
from trainlib.errors import TrainingInputError

log = logging.getLogger(__name__)
CHUNK_ROWS = 65536


@dataclass(frozen=True)
class HiggsTable:
    """The parsed CSV: one row per event."""

    feature_names: tuple[str, ...]
    features: np.ndarray  # (N, F) float32
    label: np.ndarray  # (N,) uint8
    weight: np.ndarray  # (N,) float32
    event_id: np.ndarray  # (N,) int64


def _layout(path: str, header: list[str]) -> tuple[list[int], int, int | None, int]:
    """Column indices of the features, EventId, Weight (optional) and Label, or a clear error."""
    missing = [name for name in (EVENT_ID, LABEL) if name not in header]
    features = [index for index, name in enumerate(header) if name.startswith(FEATURE_PREFIXES)]
    if missing or not features:
        wanted = ", ".join(missing + ([] if features else ["DER_*/PRI_* feature columns"]))
        raise TrainingInputError(
            f"{path}: header lacks {wanted}; expected the Higgs challenge columns EventId, DER_*, PRI_*, Weight, Label"
        )
    known = (EVENT_ID, WEIGHT, LABEL)
    ignored = [name for name in header if name not in known and not name.startswith(FEATURE_PREFIXES)]
    if ignored:
        log.info("%s: ignoring columns %s", path, ", ".join(ignored))
    weight = header.index(WEIGHT) if WEIGHT in header else None
    if weight is None:
        log.info("%s: no Weight column; every event gets weight 1.0", path)
    return features, header.index(EVENT_ID), weight, header.index(LABEL)


def _number(path: str, line: int, column: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TrainingInputError(f"{path}: line {line}, column {column}: {text!r} is not a number") from None


def _rows(path: str) -> Iterator[tuple[int, list[str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.reader(handle), start=1):
            if row:
                yield line, row


def read_csv(path: str) -> HiggsTable:
    """Parse and check the whole CSV; errors name the line and column."""
    if not os.path.isfile(path):
        raise TrainingInputError(f"{path}: file not found; pass the challenge's training.csv")
    rows = _rows(path)
    try:
        _, header = next(rows)
    except StopIteration:
        raise TrainingInputError(f"{path}: empty file; expected a header line and events") from None
    header = [name.strip() for name in header]
    feature_columns, id_column, weight_column, label_column = _layout(path, header)
    names = tuple(header[index] for index in feature_columns)
    chunks: list[tuple[np.ndarray, ...]] = []
    features: list[list[float]] = []
    labels: list[int] = []
    weights: list[float] = []
    ids: list[int] = []

    def flush() -> None:  # numpy chunks keep memory near the size of the arrays, not of Python floats
        chunks.append((np.asarray(features, dtype=np.float32).reshape(len(labels), len(names)),
                       np.asarray(labels, dtype=np.uint8), np.asarray(weights, dtype=np.float32),
                       np.asarray(ids, dtype=np.int64)))
        for values in (features, labels, weights, ids):
            values.clear()

    for line, row in rows:
        if len(row) != len(header):
            raise TrainingInputError(f"{path}: line {line}: expected {len(header)} fields, found {len(row)}")
        label = row[label_column].strip()
        if label not in LABEL_INDEX:
            raise TrainingInputError(f"{path}: line {line}, column Label: must be 'b' or 's', found {label!r}")
        features.append([_number(path, line, header[index], row[index]) for index in feature_columns])
        labels.append(LABEL_INDEX[label])
        weights.append(1.0 if weight_column is None else _number(path, line, WEIGHT, row[weight_column]))
        ids.append(int(_number(path, line, EVENT_ID, row[id_column])))
        if len(labels) == CHUNK_ROWS:
            flush()
    flush()
    if sum(len(chunk[1]) for chunk in chunks) == 0:
        raise TrainingInputError(f"{path}: no events after the header")
    columns = [np.concatenate(parts) for parts in zip(*chunks, strict=True)]
    return HiggsTable(feature_names=names, features=columns[0], label=columns[1], weight=columns[2],
                      event_id=columns[3])


def split_indices(rows: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train, test) row indices; the test part has round(rows * test_fraction) rows."""
    if not 0.0 < test_fraction < 1.0:
        raise TrainingInputError(f"--test-fraction must lie strictly between 0 and 1, got {test_fraction}")
    order = np.random.default_rng(seed).permutation(rows)
    test_rows = int(round(rows * test_fraction))
    if test_rows == 0 or test_rows == rows:
        raise TrainingInputError(f"{rows} events cannot be split with --test-fraction {test_fraction}; give more")
    return order[test_rows:], order[:test_rows]


def write_hdf5(path: str, table: HiggsTable, rows: np.ndarray) -> None:
    """Write the selected rows of `table` in the program's layout (to a temporary name, then renamed)."""
    temporary = f"{path}.tmp"
    with h5py.File(temporary, "w") as handle:
        chunk = (min(CHUNK_ROWS, len(rows)),)
        width = len(table.feature_names)
        dataset = handle.create_dataset("features", data=table.features[rows], chunks=(*chunk, width))
        dataset.attrs["feature_names"] = list(table.feature_names)
        labels = handle.create_dataset("label", data=table.label[rows], chunks=chunk)
        labels.attrs["label_names"] = list(LABEL_NAMES)
        handle.create_dataset("weight", data=table.weight[rows], chunks=chunk)
        handle.create_dataset("event_id", data=table.event_id[rows], chunks=chunk)
    os.replace(temporary, path)


def convert(csv_path: str, out_dir: str, test_fraction: float = 0.3, seed: int = 0) -> dict[str, int]:
    """CSV -> `<out_dir>/train.h5` + `<out_dir>/test.h5`; returns the number of events in each."""
    table = read_csv(csv_path)
    train_rows, test_rows = split_indices(len(table.label), test_fraction, seed)
    os.makedirs(out_dir, exist_ok=True)
    write_hdf5(os.path.join(out_dir, "train.h5"), table, train_rows)
    write_hdf5(os.path.join(out_dir, "test.h5"), table, test_rows)
    return {"train": len(train_rows), "test": len(test_rows)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m higgs.convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="the challenge CSV (training.csv or the Open Data atlas-higgs-challenge CSV)")
    parser.add_argument("out_dir", help="directory for train.h5 and test.h5")
    parser.add_argument("--test-fraction", type=float, default=0.3, help="share of events for test.h5 (default 0.3)")
    parser.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    counts = convert(args.csv, args.out_dir, args.test_fraction, args.seed)
    print(f"higgs.convert: wrote {counts['train']} training and {counts['test']} test events to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, "higgs.convert"))
