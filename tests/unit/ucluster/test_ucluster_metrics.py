"""Cluster accuracy: the Hungarian matching finds the relabelling, and rank-local counts add up."""

import numpy as np
import pytest

from ucluster.metrics import cluster_accuracy, confusion_counts, matched_accuracy


def test_a_permuted_but_perfect_clustering_scores_one():
    truth = np.array([0, 0, 1, 1, 2, 2, 2])
    permutation = np.array([2, 0, 1])  # class t is called cluster permutation[t]
    assert cluster_accuracy(truth, permutation[truth], 3) == 1.0


@pytest.mark.parametrize("permutation", [[0, 1, 2], [1, 2, 0], [2, 1, 0]])
def test_one_mistake_costs_one_sample_whatever_the_labels(permutation):
    truth = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    assigned = np.array(permutation)[truth]
    assigned[0] = np.array(permutation)[1]  # one class-0 sample lands in class 1's cluster
    assert cluster_accuracy(truth, assigned, 3) == pytest.approx(9 / 10)


def test_matching_is_one_to_one_not_majority_vote():
    # Everything in one cluster: a majority vote would say 60%, a one-to-one matching counts only one class.
    truth = np.array([0, 0, 0, 1, 1])
    assigned = np.zeros(5, dtype=int)
    assert cluster_accuracy(truth, assigned, 2) == pytest.approx(3 / 5)


def test_counts_summed_over_shards_equal_counts_of_the_whole():
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, 200)
    assigned = rng.integers(0, 4, 200)
    shards = [confusion_counts(truth[i:i + 50], assigned[i:i + 50], 4) for i in range(0, 200, 50)]
    assert np.array_equal(sum(shards), confusion_counts(truth, assigned, 4))
    assert matched_accuracy(sum(shards)) == cluster_accuracy(truth, assigned, 4)


def test_counts_are_indexed_cluster_then_class():
    counts = confusion_counts(np.array([0, 1, 1]), np.array([2, 0, 0]), 3)
    assert counts[2, 0] == 1 and counts[0, 1] == 2 and counts.sum() == 3


def test_no_samples_scores_zero_and_bad_indices_are_named():
    assert matched_accuracy(np.zeros((3, 3))) == 0.0
    with pytest.raises(ValueError, match="cluster index out of range"):
        confusion_counts(np.array([0]), np.array([3]), 3)
