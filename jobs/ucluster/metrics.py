"""Cluster accuracy: count (cluster, true class) pairs, then match clusters to classes with the Hungarian method.

The counts are additive, so every rank counts its own shard and the matrices are summed over ranks (allreduce) before
the one matching; the notebook instead averaged per-batch accuracies, each matched separately.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


def confusion_counts(true_classes: np.ndarray, assigned_clusters: np.ndarray, num_clusters: int) -> np.ndarray:
    """int64 (num_clusters, num_clusters) matrix; entry [c, t] counts the samples of class t put in cluster c."""
    true_classes = np.asarray(true_classes, dtype=np.int64).ravel()
    assigned_clusters = np.asarray(assigned_clusters, dtype=np.int64).ravel()
    if true_classes.shape != assigned_clusters.shape:
        raise ValueError(
            f"true classes ({true_classes.size}) and assigned clusters ({assigned_clusters.size}) differ in length"
        )
    for name, values in (("true class", true_classes), ("cluster", assigned_clusters)):
        if values.size and (values.min() < 0 or values.max() >= num_clusters):
            raise ValueError(f"{name} index out of range [0, {num_clusters}): min {values.min()}, max {values.max()}")
    flat = assigned_clusters * num_clusters + true_classes
    return np.bincount(flat, minlength=num_clusters * num_clusters).reshape(num_clusters, num_clusters)


def matched_accuracy(counts: np.ndarray) -> float:
    """Fraction of samples on the diagonal after the best one-to-one relabelling of clusters (0.0 for no samples)."""
    counts = np.asarray(counts)
    total = counts.sum()
    if total == 0:
        return 0.0
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / total)


def cluster_accuracy(true_classes: np.ndarray, assigned_clusters: np.ndarray, num_clusters: int) -> float:
    """Hungarian-matched accuracy of a clustering against the true classes (single process)."""
    return matched_accuracy(confusion_counts(true_classes, assigned_clusters, num_clusters))
