"""Higgs HDF5 input: checks before training, per-rank scaling sums, standardised training batches."""

import h5py
import numpy as np
import pytest

from higgs import synthetic
from higgs.convert import convert
from higgs.data import load, rank_moments, training_input
from higgs.scaling import mean_and_std, merge
from trainlib.errors import DataFileError
from trainlib.hdf5_files import rank_block


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("higgs")
    synthetic.main([str(folder / "training.csv"), "--events", "301", "--seed", "4"])
    convert(str(folder / "training.csv"), str(folder / "data"))
    return folder / "data"


def test_rank_sums_merge_to_numpys_statistics_of_the_rows_trained_on(data_dir):
    data = load(str(data_dir), "train.h5", "test.h5")
    assert data.num_features == 30 and data.feature_names[0] == "DER_mass_MMC"
    size = 3
    mean, std = mean_and_std(merge(rank_moments(data.train, rank, size) for rank in range(size)))
    with h5py.File(data.train.path) as handle:
        rows = np.concatenate([handle["features"][slice(*rank_block(data.train.rows, rank, size))]
                               for rank in range(size)]).astype(np.float64)
    np.testing.assert_allclose(mean, rows.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(std, rows.std(axis=0, ddof=1), rtol=1e-8)


def test_training_batches_are_standardised_with_one_hot_targets(data_dir):
    data = load(str(data_dir), "train.h5", "test.h5")
    with h5py.File(data.train.path) as handle:
        rows = handle["features"][()].astype(np.float64)
        labels = handle["label"][()]
    mean, std = rows.mean(axis=0), rows.std(axis=0) + 1.0
    pipeline = training_input(data.train, mean, std, rank=0, size=1, batch_size=len(rows), seed=None)
    features, targets = next(iter(pipeline.dataset))  # one shuffled batch holding every row
    assert features.shape == (len(rows), 30) and targets.shape == (len(rows), 2)
    expected = np.sort(((rows - mean) / std).astype(np.float32), axis=0)
    np.testing.assert_allclose(np.sort(features.numpy(), axis=0), expected, rtol=1e-5, atol=1e-5)
    assert np.bincount(targets.numpy().argmax(axis=1)).tolist() == np.bincount(labels).tolist()


def _write(path, features, labels):
    with h5py.File(path, "w") as handle:
        handle.create_dataset("features", data=features).attrs["feature_names"] = [f"f{i}" for i in range(3)]
        handle.create_dataset("label", data=labels)


def test_test_file_with_other_columns_is_rejected(tmp_path):
    _write(tmp_path / "train.h5", np.zeros((4, 3), np.float32), np.zeros(4, np.uint8))
    _write(tmp_path / "test.h5", np.zeros((4, 2), np.float32), np.zeros(4, np.uint8))
    with pytest.raises(DataFileError, match=r"test.h5:features: rows have shape \(2,\)"):
        load(str(tmp_path), "train.h5", "test.h5")


def test_labels_other_than_b_and_s_are_rejected(tmp_path):
    _write(tmp_path / "train.h5", np.zeros((4, 3), np.float32), np.array([0, 1, 2, 0], np.uint8))
    _write(tmp_path / "test.h5", np.zeros((4, 3), np.float32), np.zeros(4, np.uint8))
    with pytest.raises(DataFileError, match=r"train.h5:label: labels must be 0 \(b\) or 1 \(s\), found 0..2"):
        load(str(tmp_path), "train.h5", "test.h5")


def test_string_labels_name_the_converter(tmp_path):
    _write(tmp_path / "train.h5", np.zeros((4, 3), np.float32), np.array([b"s", b"b", b"b", b"s"]))
    _write(tmp_path / "test.h5", np.zeros((4, 3), np.float32), np.zeros(4, np.uint8))
    with pytest.raises(DataFileError, match=r"train.h5:label: expected shape \(N\) and dtype int/uint.*higgs.convert"):
        load(str(tmp_path), "train.h5", "test.h5")
