"""Scaling statistics merged from per-rank partial sums equal numpy's on the whole training split."""

import numpy as np
import pytest

from higgs.scaling import Moments, mean_and_std, merge, moments, standardize


def test_merged_shard_statistics_equal_numpy_on_the_concatenation():
    rng = np.random.default_rng(0)
    shards = [rng.normal(5.0, 3.0, (n, 4)) for n in (7, 1, 30, 12)]
    shards[2][:, 1] = -999.0  # the challenge's missing-value marker in one shard
    mean, std = mean_and_std(merge(moments(shard) for shard in shards))
    whole = np.concatenate(shards)
    np.testing.assert_allclose(mean, whole.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, whole.std(axis=0, ddof=1), rtol=1e-9)


def test_moments_survive_the_flat_vector_that_is_all_reduced():
    summary = moments(np.arange(12.0).reshape(4, 3))
    again = Moments.from_vector(summary.to_vector())
    assert again.count == 4
    np.testing.assert_array_equal(again.total, summary.total)
    np.testing.assert_array_equal(again.total_squares, summary.total_squares)


def test_constant_feature_is_left_unscaled_and_standardized_rows_have_unit_spread():
    rows = np.column_stack([np.full(50, 3.0), np.linspace(0, 10, 50)])
    mean, std = mean_and_std(moments(rows))
    assert std[0] == 1.0
    scaled = standardize(rows, mean, std)
    assert scaled.dtype == np.float32
    np.testing.assert_allclose(scaled[:, 0], 0.0)
    assert scaled[:, 1].std(ddof=1) == pytest.approx(1.0, rel=1e-5)


def test_too_few_rows_is_an_error():
    with pytest.raises(ValueError, match="at least 2 rows"):
        mean_and_std(moments(np.ones((1, 3))))
