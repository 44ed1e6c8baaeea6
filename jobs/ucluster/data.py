"""UCluster's data files: the file lists and the HDF5 layout, checked before TensorFlow loads (`ucluster.train` turns
the checked files into each rank's tf.data pipeline of (points, pid, cluster)).

Layout of every file (the reference's): `data` (N, points, features) float particles, `pid` (N,) integer class of the
pretext task in [0, ncat), `label` (N, n_clusters) one-hot true cluster. `train_files.txt` and `test_files.txt` in the
data directory name the files, one per line, relative to that directory (or absolute); `#` starts a comment.
"""

from __future__ import annotations

import os

import h5py
import numpy as np

from trainlib.errors import DataFileError, TrainingInputError
from trainlib.hdf5_files import ArraySpec, FileInfo, validate_files

FIX = "write files in the UCluster layout (or synthetic ones with `python -m ucluster.synthetic <data dir>`)"
SCAN_ROWS = 65536  # rows of pid/label read at a time when checking their values


def read_file_list(data_dir: str, list_name: str) -> list[str]:
    """Paths named by `<data_dir>/<list_name>`, resolved against `data_dir`."""
    list_path = os.path.join(data_dir, list_name)
    if not os.path.isfile(list_path):
        raise TrainingInputError(
            f"{list_path}: file list not found; put {list_name} in the data directory (--data-dir) naming one HDF5 "
            f"file per line, or generate synthetic data with `python -m ucluster.synthetic {data_dir}`"
        )
    with open(list_path, encoding="utf-8") as handle:
        entries = [line.split("#", 1)[0].strip() for line in handle]
    paths = [entry if os.path.isabs(entry) else os.path.join(data_dir, entry) for entry in entries if entry]
    if not paths:
        raise TrainingInputError(f"{list_path}: names no HDF5 files; list one file per line")
    return paths


def array_specs(num_points: int, num_features: int, num_clusters: int) -> list[ArraySpec]:
    return [
        ArraySpec("data", (num_points, num_features), kinds="f"),
        ArraySpec("pid", (), kinds="iu"),
        ArraySpec("label", (num_clusters,), kinds="iufb"),
    ]


def check_values(info: FileInfo, num_classes: int) -> None:
    """pid must lie in [0, num_classes) and every label row must be one-hot; scans those two small datasets."""
    with h5py.File(info.path, "r") as handle:
        pid, label = handle["pid"], handle["label"]
        for start in range(0, info.rows, SCAN_ROWS):
            classes = pid[start : start + SCAN_ROWS]
            if classes.min() < 0 or classes.max() >= num_classes:
                raise DataFileError(
                    info.path,
                    f"class indices must lie in [0, {num_classes}) (--ncat), found {classes.min()}..{classes.max()}",
                    "pass the right --ncat or fix the file",
                    "pid",
                )
            rows = np.asarray(label[start : start + SCAN_ROWS], dtype=np.float64)
            one_hot = (np.isin(rows, (0.0, 1.0)).all(axis=1)) & (rows.sum(axis=1) == 1.0)
            if not one_hot.all():
                bad = start + int(np.argmin(one_hot))
                raise DataFileError(
                    info.path, f"row {bad} is not one-hot: {rows[bad - start].tolist()}", "fix the file", "label"
                )


def validate_split(
    data_dir: str, list_name: str, num_points: int, num_features: int, num_classes: int, num_clusters: int
) -> list[FileInfo]:
    """Read one file list and check every file's layout and values before training starts."""
    paths = read_file_list(data_dir, list_name)
    infos = validate_files(paths, array_specs(num_points, num_features, num_clusters), FIX)
    for info in infos:
        check_values(info, num_classes)
    return infos
