"""Epoch metrics as plain finite floats: the form checkpoint records, `history.json` and the status all take."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import SupportsFloat


def finite_metrics(metrics: Mapping[str, object]) -> dict[str, float]:
    """The entries of `metrics` (e.g. a Keras `logs` dict) that are finite numbers, as floats; NaN, inf and anything
    `float()` cannot read are left out (JSON and the CRD schema take finite floats only)."""
    clean: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(value, (str, SupportsFloat)):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):  # text that is no number, arrays of more than one value
            continue
        if math.isfinite(number):
            clean[str(name)] = number
    return clean
