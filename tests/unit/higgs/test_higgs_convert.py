"""The challenge CSV -> train/test HDF5 converter: round trip, the Open Data variant, and clear errors."""

import csv
import subprocess
import sys

import h5py
import numpy as np
import pytest

from higgs import synthetic
from higgs.columns import CSV_COLUMNS, FEATURES
from higgs.convert import convert, read_csv
from trainlib.errors import TrainingInputError


@pytest.fixture()
def challenge_csv(tmp_path):
    path = tmp_path / "training.csv"
    synthetic.main([str(path), "--events", "200", "--seed", "3"])
    return path


def _rows_by_id(path):
    with open(path, newline="") as handle:
        return {int(row["EventId"]): row for row in csv.DictReader(handle)}


def test_round_trip_keeps_every_event_exactly_once(challenge_csv, tmp_path):
    counts = convert(str(challenge_csv), str(tmp_path / "out"), test_fraction=0.3, seed=1)
    assert counts == {"train": 140, "test": 60}
    source = _rows_by_id(challenge_csv)
    seen = set()
    for split in ("train", "test"):
        with h5py.File(tmp_path / "out" / f"{split}.h5") as handle:
            assert list(handle["features"].attrs["feature_names"]) == list(FEATURES)
            features, labels = handle["features"][()], handle["label"][()]
            weights, ids = handle["weight"][()], handle["event_id"][()]
        assert features.dtype == np.float32 and labels.dtype == np.uint8
        for row_features, label, weight, event_id in zip(features, labels, weights, ids, strict=True):
            row = source[int(event_id)]
            expected = np.array([float(row[name]) for name in FEATURES], dtype=np.float32)
            np.testing.assert_array_equal(row_features, expected)
            assert label == {"b": 0, "s": 1}[row["Label"]]
            assert weight == np.float32(float(row["Weight"]))
            seen.add(int(event_id))
    assert seen == set(source)


def test_split_is_shuffled_and_reproducible(challenge_csv, tmp_path):
    convert(str(challenge_csv), str(tmp_path / "a"), seed=5)
    convert(str(challenge_csv), str(tmp_path / "b"), seed=5)
    with h5py.File(tmp_path / "a" / "test.h5") as first, h5py.File(tmp_path / "b" / "test.h5") as second:
        ids = first["event_id"][()]
        np.testing.assert_array_equal(ids, second["event_id"][()])
    assert not np.all(np.diff(ids) > 0)  # not simply the first rows in file order


def test_open_data_extra_columns_are_ignored_and_missing_weight_means_one(tmp_path):
    path = tmp_path / "open.csv"
    columns = [name for name in CSV_COLUMNS if name != "Weight"] + ["KaggleSet", "KaggleWeight"]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for event in range(3):
            values = {name: "1.5" for name in FEATURES} | {"EventId": 350000 + event, "Label": "bs"[event % 2],
                                                            "KaggleSet": "t", "KaggleWeight": "0.1"}
            writer.writerow([values[name] for name in columns])
    table = read_csv(str(path))
    assert table.feature_names == FEATURES
    np.testing.assert_array_equal(table.weight, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(table.label, [0, 1, 0])


def _set_field(lines, line_number, column, value):
    fields = lines[line_number - 1].split(",")
    fields[column] = value
    return lines[: line_number - 1] + [",".join(fields)] + lines[line_number:]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lines: _set_field(lines, 2, -1, "x"), r"line 2, column Label: must be 'b' or 's', found 'x'"),
        (lambda lines: lines[:2] + [lines[2].rsplit(",", 2)[0] + ",b"] + lines[3:], r"line 3: expected 33 fields"),
        (lambda lines: _set_field(lines, 4, 1, "abc"), r"line 4, column DER_mass_MMC: 'abc' is not a number"),
        (lambda lines: [lines[0].replace(",Label", ",Class")] + lines[1:], r"header lacks Label"),
    ],
)
def test_bad_csv_errors_name_line_and_column(challenge_csv, mutate, message):
    lines = challenge_csv.read_text().splitlines()
    challenge_csv.write_text("\n".join(mutate(lines)) + "\n")
    with pytest.raises(TrainingInputError, match=message):
        read_csv(str(challenge_csv))


def test_command_line_error_is_one_line_and_exit_code_2(tmp_path):
    bad = tmp_path / "training.csv"
    bad.write_text("EventId,DER_mass_MMC,Label\n1,2.0,q\n")
    done = subprocess.run([sys.executable, "-m", "higgs.convert", str(bad), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"higgs.convert: error: {bad}: line 2, column Label: must be 'b' or 's', found 'q'"]
    assert not (tmp_path / "out").exists()
