"""Synthetic jets in the UCluster layout, file lists, and clear errors for files that do not fit."""

import os

import h5py
import numpy as np
import pytest

from trainlib.errors import DataFileError, TrainingInputError
from ucluster import synthetic
from ucluster.data import read_file_list, validate_split
from ucluster.train import rank_input


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ucluster")
    synthetic.main([str(out), "--train-jets", "60", "--test-jets", "20", "--files", "2", "--seed", "1"])
    return str(out)


def _validate(data_dir, name="train_files.txt", points=100):
    return validate_split(data_dir, name, num_points=points, num_features=8, num_classes=20, num_clusters=3)


def test_generator_writes_the_reference_layout_and_file_lists(data_dir):
    assert read_file_list(data_dir, "train_files.txt") == [os.path.join(data_dir, f"train_{i}.h5") for i in (0, 1)]
    infos = _validate(data_dir)
    assert sum(info.rows for info in infos) == 60
    with h5py.File(infos[0].path) as handle:
        assert handle["data"].shape[1:] == (100, 8) and handle["data"].dtype == np.float32
        assert handle["label"].shape[1:] == (3,) and set(np.unique(handle["label"][()].sum(axis=1))) == {1}
        assert "synthetic" in handle.attrs["synthetic"]


def test_jet_types_differ_in_the_pretext_mass_classes():
    jets = synthetic.make_jets(np.random.default_rng(0), 600)
    types = jets["label"].argmax(axis=1)
    mean_class = [jets["pid"][types == t].mean() for t in range(3)]
    assert mean_class[0] < mean_class[1] < mean_class[2]  # W < Z < top in mass


def test_each_rank_reads_its_own_contiguous_block(data_dir):
    infos = _validate(data_dir, "test_files.txt")  # two files of 10 jets
    with h5py.File(infos[0].path) as handle:
        first_rows = handle["data"][()]
    seen = []
    for rank in (0, 1):
        pipeline = rank_input(infos, rank=rank, size=2, batch_size=5, training=False)
        points, pid, cluster = next(iter(pipeline.dataset))
        assert points.shape == (5, 100, 8) and pid.dtype.name == "int32" and cluster.dtype.name == "int32"
        seen.append(points.numpy())
    np.testing.assert_array_equal(seen[0], first_rows[0:5])
    np.testing.assert_array_equal(seen[1], first_rows[5:10])


def test_missing_file_list_says_how_to_make_one(tmp_path):
    with pytest.raises(TrainingInputError, match="train_files.txt: file list not found.*ucluster.synthetic"):
        _validate(str(tmp_path))


def _one_file(tmp_path, **arrays):
    base = synthetic.make_jets(np.random.default_rng(0), 4)
    base.update(arrays)
    with h5py.File(tmp_path / "bad.h5", "w") as handle:
        for name, values in base.items():
            handle.create_dataset(name, data=values)
    (tmp_path / "train_files.txt").write_text("bad.h5\n")
    return str(tmp_path)


def test_wrong_particle_count_names_file_dataset_and_shapes(tmp_path):
    data_dir = _one_file(tmp_path, data=np.zeros((4, 50, 8), np.float32))
    with pytest.raises(DataFileError) as error:
        _validate(data_dir)
    message = str(error.value)
    assert "bad.h5:data" in message and "(N, 100, 8)" in message and "(4, 50, 8)" in message
    assert "\n" not in message


def test_class_index_beyond_ncat_is_reported(tmp_path):
    data_dir = _one_file(tmp_path, pid=np.array([0, 1, 25, 2], np.int32))
    with pytest.raises(DataFileError, match=r"bad.h5:pid.*\[0, 20\) \(--ncat\), found 0..25"):
        _validate(data_dir)


def test_label_rows_must_be_one_hot(tmp_path):
    label = np.eye(3, dtype=np.uint8)[[0, 1, 2, 0]]
    label[2] = [1, 1, 0]
    with pytest.raises(DataFileError, match="bad.h5:label: row 2 is not one-hot"):
        _validate(_one_file(tmp_path, label=label))


def test_truncated_file_is_reported_as_corrupt(tmp_path, data_dir):
    source = os.path.join(data_dir, "train_0.h5")
    with open(source, "rb") as handle:
        head = handle.read(os.path.getsize(source) // 3)
    (tmp_path / "cut.h5").write_bytes(head)
    (tmp_path / "train_files.txt").write_text("cut.h5\n")
    with pytest.raises(DataFileError, match=r"cut.h5: .*(truncated|corrupt)"):
        _validate(str(tmp_path))
