"""Validating HDF5 files and splitting rows between ranks (h5py only, no TensorFlow)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from trainlib.errors import DataFileError, TrainingInputError
from trainlib.hdf5_files import ArraySpec, iter_block_chunks, rank_block, rows_per_rank, validate_files
from trainlib.hdf5_writer import HDF5Writer

SPECS = [ArraySpec("images", (None, None, 3), dtype="uint8"), ArraySpec("labels", (), kinds="iu")]
FIX = "rerun the converter"


def write(path, images, labels=None):
    with h5py.File(path, "w") as handle:
        handle["images"] = images
        if labels is not None:
            handle["labels"] = labels
    return str(path)


@pytest.mark.parametrize(("rows", "size", "expected"), [
    (10, 1, [(0, 10)]),
    (10, 2, [(0, 5), (5, 10)]),
    (10, 3, [(0, 3), (3, 6), (6, 9)]),      # the last row is left out so every rank gets 3
    (2, 4, [(0, 0), (0, 0), (0, 0), (0, 0)]),
])
def test_each_rank_reads_an_equal_contiguous_block(rows, size, expected):
    assert [rank_block(rows, rank, size) for rank in range(size)] == expected


def test_rank_outside_the_job_is_rejected():
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        rank_block(10, 2, 2)


def test_valid_files_report_rows_shapes_and_dtypes(tmp_path):
    first = write(tmp_path / "a.h5", np.zeros((7, 4, 4, 3), np.uint8), np.arange(7))
    second = write(tmp_path / "b.h5", np.zeros((5, 4, 4, 3), np.uint8), np.arange(5, dtype=np.uint8))
    infos = validate_files([first, second], SPECS, FIX)
    assert [info.rows for info in infos] == [7, 5]
    assert infos[0].row_shapes == {"images": (4, 4, 3), "labels": ()}
    assert rows_per_rank(infos, 2) == 3 + 2


BAD = {
    "missing file": (lambda p: None, "a.h5: file not found; rerun the converter"),
    "not hdf5": (lambda p: p.write_bytes(b"not an hdf5 file" * 64), "a.h5: not a readable HDF5 file (corrupt or not "
                                                                   "HDF5: no HDF5 signature); rerun the converter"),
    "missing dataset": (lambda p: write(p, np.zeros((3, 4, 4, 3), np.uint8)),
                        "a.h5:labels: missing dataset (expected shape (N) and dtype int/uint; datasets present: "
                        "images); rerun the converter"),
    "wrong channels": (lambda p: write(p, np.zeros((3, 4, 4, 1), np.uint8), np.arange(3)),
                       "a.h5:images: expected shape (N, *, *, 3) and dtype uint8, found shape (3, 4, 4, 1) and dtype "
                       "uint8; rerun the converter"),
    "wrong dtype": (lambda p: write(p, np.zeros((3, 4, 4, 3), np.uint8), np.zeros(3, np.float32)),
                    "a.h5:labels: expected shape (N) and dtype int/uint, found shape (3,) and dtype float32"),
    "row mismatch": (lambda p: write(p, np.zeros((3, 4, 4, 3), np.uint8), np.arange(4)),
                     "a.h5:labels: has 4 rows but 'images' has 3"),
    "empty": (lambda p: write(p, np.zeros((0, 4, 4, 3), np.uint8), np.arange(0)), "a.h5:images: dataset has no rows"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_raise_one_error_naming_file_dataset_and_fix(tmp_path, case):
    make, expected = BAD[case]
    path = tmp_path / "a.h5"
    make(path)
    with pytest.raises(DataFileError) as raised:
        validate_files([str(path)], SPECS, FIX)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path))
    assert expected in message


def test_file_cut_short_inside_the_data_is_caught(tmp_path):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w", libver="earliest") as handle:
        handle.create_dataset("images", data=np.ones((4000, 4, 4, 3), np.uint8))
        handle.create_dataset("labels", data=np.arange(4000))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(DataFileError, match=r"a\.h5.*truncated"):
        validate_files([str(path)], SPECS, FIX)


def test_files_must_agree_on_row_shapes(tmp_path):
    first = write(tmp_path / "a.h5", np.zeros((3, 4, 4, 3), np.uint8), np.arange(3))
    second = write(tmp_path / "b.h5", np.zeros((3, 8, 8, 3), np.uint8), np.arange(3))
    with pytest.raises(DataFileError, match=r"b\.h5:images: rows have shape \(8, 8, 3\) but .*a\.h5 has \(4, 4, 3\)"):
        validate_files([first, second], SPECS, FIX)


def test_no_files_is_an_input_error():
    with pytest.raises(TrainingInputError, match="no data files given; rerun the converter"):
        validate_files([], SPECS, FIX)


def test_chunks_cover_exactly_this_ranks_block_of_every_file(tmp_path):
    paths = [write(tmp_path / f"{i}.h5", np.zeros((n, 1, 1, 3), np.uint8), np.arange(100 * i, 100 * i + n))
             for i, n in enumerate((11, 8))]
    infos = validate_files(paths, SPECS, FIX)
    seen = []
    for rank in range(2):
        chunks = list(iter_block_chunks(infos, ["labels"], rank, 2, chunk_rows=2))
        assert all(len(labels) <= 2 for (labels,) in chunks)
        seen.append(np.concatenate([labels for (labels,) in chunks]).tolist())
    assert seen == [[0, 1, 2, 3, 4, 100, 101, 102, 103], [5, 6, 7, 8, 9, 104, 105, 106, 107]]

    shuffled = list(iter_block_chunks(infos, ["labels"], 1, 2, chunk_rows=2, rng=np.random.default_rng(3)))
    assert sorted(np.concatenate([labels for (labels,) in shuffled]).tolist()) == seen[1]


def test_parts_split_a_ranks_block_between_readers_by_chunk(tmp_path):
    paths = [write(tmp_path / f"{i}.h5", np.zeros((n, 1, 1, 3), np.uint8), np.arange(100 * i, 100 * i + n))
             for i, n in enumerate((11, 8))]
    infos = validate_files(paths, SPECS, FIX)
    parts = [np.concatenate([labels for (labels,) in iter_block_chunks(infos, ["labels"], 0, 2, 2, None, part, 2)])
             for part in range(2)]
    assert [part.tolist() for part in parts] == [[0, 1, 4, 100, 101], [2, 3, 102, 103]]
    with pytest.raises(ValueError, match="part 2 is outside 0..1"):
        next(iter_block_chunks(infos, ["labels"], 0, 2, 2, None, 2, 2))


def test_writer_publishes_only_complete_files(tmp_path):
    path = tmp_path / "out.h5"
    with HDF5Writer(str(path), {"x": ((2,), "float32"), "y": ((), "int64")}) as writer:
        writer.append(x=np.ones((3, 2)), y=np.arange(3))
        assert not path.exists(), "invisible under its final name until closed"
        writer.append(x=np.zeros((2, 2)), y=np.arange(2))
    with h5py.File(path) as handle:
        assert handle["x"].shape == (5, 2) and handle["y"][()].tolist() == [0, 1, 2, 0, 1]

    with pytest.raises(ValueError, match="equal row counts"), HDF5Writer(str(tmp_path / "bad.h5"),
                                                                         {"x": ((), "int64"), "y": ((), "int64")}) as w:
        w.append(x=np.arange(2), y=np.arange(3))
    assert list(tmp_path.iterdir()) == [path], "a failed write leaves nothing behind"
