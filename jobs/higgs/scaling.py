"""Standard scaling with statistics of the training split, merged from per-rank partial sums.

Each rank sums its own block (count, sum, sum of squares, in float64); the sums are added over ranks (allreduce) and
turned into mean and standard deviation. The standard deviation is the corrected sample one (n - 1), as Spark's
StandardScaler in the notebook computes it; a feature with zero spread is divided by 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Additive summary of rows: count, per-feature sum and sum of squares."""

    count: float
    total: np.ndarray
    total_squares: np.ndarray

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.count + other.count, self.total + other.total, self.total_squares + other.total_squares)

    def to_vector(self) -> np.ndarray:
        """Flatten into one float64 vector (what is all-reduced)."""
        return np.concatenate([[self.count], self.total, self.total_squares])

    @classmethod
    def from_vector(cls, vector: np.ndarray) -> Moments:
        width = (len(vector) - 1) // 2
        return cls(float(vector[0]), np.asarray(vector[1 : 1 + width]), np.asarray(vector[1 + width :]))


def moments(rows: np.ndarray) -> Moments:
    """Moments of a (rows, features) array."""
    values = np.asarray(rows, dtype=np.float64)
    return Moments(float(len(values)), values.sum(axis=0), np.square(values).sum(axis=0))


def merge(parts: Iterable[Moments]) -> Moments:
    """Sum of several Moments (e.g. of consecutive chunks)."""
    parts = list(parts)
    if not parts:
        raise ValueError("no rows to compute scaling statistics from")
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def mean_and_std(summary: Moments) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and corrected sample standard deviation (1.0 where a feature does not vary)."""
    if summary.count < 2:
        raise ValueError(f"need at least 2 rows for a standard deviation, got {summary.count:g}")
    mean = summary.total / summary.count
    variance = (summary.total_squares - summary.count * np.square(mean)) / (summary.count - 1)
    std = np.sqrt(np.maximum(variance, 0.0))
    return mean, np.where(std > 0.0, std, 1.0)


def standardize(rows: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """(rows - mean) / std as float32."""
    return ((np.asarray(rows, dtype=np.float64) - mean) / std).astype(np.float32)
