"""How the pipeline-alone benchmark turns alternated runs into its rows: medians, HDF5 against each contender."""

from __future__ import annotations

import pytest

from .input_pipeline import rows_alone


def result(hdf5: list[float], memory: list[float], notebook: list[float]) -> dict:
    return {"images_per_second": {"hdf5": hdf5, "memory": memory, "notebook": notebook},
            "images_per_cpu_second": {"hdf5": [30.0], "memory": [40.0], "notebook": [10.0]},
            "batch_size": 32, "threads": 2, "rows": 50_000}


def test_rows_compare_medians_and_say_whether_each_target_is_met() -> None:
    memory_row, notebook_row, cpu_row = rows_alone(result([90.0, 10.0, 95.0], [100.0, 100.0, 5.0], [30.0] * 3), 3)
    assert memory_row.value == pytest.approx(0.9) and memory_row.meets
    assert notebook_row.value == pytest.approx(3.0) and notebook_row.meets
    assert cpu_row.value == pytest.approx(0.75) and cpu_row.meets is None and "vs notebook 3.0x" in cpu_row.detail


def test_a_slow_hdf5_pipeline_misses_both_targets() -> None:
    memory_row, notebook_row, _ = rows_alone(result([40.0], [100.0], [20.0]), 1)
    assert (memory_row.meets, notebook_row.meets) == (False, False)
