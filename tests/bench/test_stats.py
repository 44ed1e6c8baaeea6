"""Percentiles, ratios and windowed rates as the benchmark table reports them."""

from __future__ import annotations

import pytest

from .stats import median, percentile, ratio, window_rates


def test_percentiles_interpolate_like_numpy() -> None:
    values = [3.0, 1.0, 2.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert median(values) == 2.5
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0


def test_p99_of_fifty_jobs_sits_between_the_two_slowest() -> None:
    latencies = [0.1] * 48 + [0.5, 2.0]
    assert 0.5 < percentile(latencies, 99) < 2.0


def test_percentile_rejects_no_values_and_bad_q() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="0, 100"):
        percentile([1.0], 101)


def test_ratio_refuses_a_zero_baseline() -> None:
    assert ratio(3.0, 4.0) == 0.75
    with pytest.raises(ValueError, match="non-positive"):
        ratio(1.0, 0.0)


def test_window_rates_split_timed_steps_evenly() -> None:
    # warm-up ends at t=10; six steps of 32 images: the first three take 1 s each, the last three 0.5 s each
    times = [10.0, 11.0, 12.0, 13.0, 13.5, 14.0, 14.5]
    assert window_rates(times, 32, 2) == [32.0, 64.0]
    assert window_rates(times, 32, 1) == [pytest.approx(6 * 32 / 4.5)]


def test_window_rates_need_a_step_per_window() -> None:
    with pytest.raises(ValueError, match="cannot be split"):
        window_rates([0.0, 1.0], 32, 2)
