"""Metrics are stored and reported as plain finite floats."""

import numpy as np

from trainlib.metrics import finite_metrics


def test_finite_metrics_keeps_plain_finite_numbers():
    assert finite_metrics({"a": 1, "b": np.float64(2.5), "c": float("inf"), "d": "text", "e": None}) == {
        "a": 1.0, "b": 2.5}


def test_finite_metrics_reads_zero_dimensional_arrays_and_skips_longer_ones():
    assert finite_metrics({"loss": np.array(0.25), "pair": np.array([1.0, 2.0]), "nan": np.float32("nan")}) == {
        "loss": 0.25}
