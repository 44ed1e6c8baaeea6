"""How the callback benchmark turns hook seconds into % of step time, per callback and for all of them."""

from __future__ import annotations

import pytest

from .callbacks import percent_of_step_time, rows


def run(setting: str, fit: float, callbacks: dict[str, float]) -> dict:
    return {"setting": setting, "fit_seconds": fit, "steps": 100, "callback_seconds": callbacks,
            "writer_busy_seconds": 1.0, "writer_cpu_seconds": 0.5}


def test_step_time_is_the_fit_less_every_callback() -> None:
    assert percent_of_step_time(run("inline", 12.0, {"a": 1.0, "b": 1.0})) == {"a": 10.0, "b": 10.0}


def test_rows_give_the_median_total_for_each_setting_and_judge_the_shipped_one() -> None:
    result = {"steps_per_epoch": 45, "epochs": 6, "patch_seconds": 0.05, "runs": [
        run("inline", 12.0, {"HistoryCallback": 2.0}), run("background", 10.1, {"BackgroundWriter": 0.1}),
        run("inline", 13.0, {"HistoryCallback": 3.0}), run("background", 10.3, {"BackgroundWriter": 0.3})]}
    shipped, inline = rows(result)
    assert shipped.value == pytest.approx((1.0 + 3.0) / 2) and shipped.meets is False
    assert "BackgroundWriter 2.00%" in shipped.detail and "step 100 ms" in shipped.detail
    assert inline.value == pytest.approx((20.0 + 30.0) / 2) and inline.meets is None
