"""Summaries of noisy timings: percentiles, medians, rates and ratios (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must lie in [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    if position == low:  # no interpolation: an infinite value stays itself instead of becoming inf - inf = nan
        return ordered[low]
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator; a zero or negative denominator is a measurement bug, not a result."""
    if denominator <= 0:
        raise ValueError(f"ratio with a non-positive denominator {denominator}")
    return numerator / denominator


def window_rates(times: Sequence[float], items_per_step: float, windows: int) -> list[float]:
    """Items per second over `windows` equal runs of consecutive steps, from step end times `times` (seconds).

    `times[0]` is the end of the last warm-up step, so `len(times) - 1` steps are split into the windows.
    """
    steps = len(times) - 1
    if windows < 1 or steps < windows:
        raise ValueError(f"{steps} timed steps cannot be split into {windows} windows")
    per_window = steps // windows
    rates = []
    for index in range(windows):
        start, stop = index * per_window, (index + 1) * per_window
        rates.append(per_window * items_per_step / (times[stop] - times[start]))
    return rates
