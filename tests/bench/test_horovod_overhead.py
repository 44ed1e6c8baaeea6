"""How the Horovod benchmark turns each rank's step times into images/s and images per CPU second."""

from __future__ import annotations

import pytest

from .horovod_overhead import FusionSetting, configs, floor_rows, images_per_cpu_second, images_per_second


def rank(times: list[float], cpu_times: list[float]) -> dict:
    return {"times": times, "cpu_times": cpu_times, "batch_size": 32, "windows": 2}


def test_images_per_second_add_up_over_ranks_window_by_window() -> None:
    ranks = [rank([0.0, 1.0, 2.0, 2.5, 3.0], [0, 1, 2, 3, 4]), rank([0.0, 1.0, 2.0, 2.5, 3.0], [0, 1, 2, 3, 4])]
    # 2 steps of 32 images per window and rank: 2 s then 1 s
    assert images_per_second(ranks) == [64.0, 128.0]


def test_images_per_cpu_second_count_every_rank_s_cpu() -> None:
    ranks = [rank([0, 1, 2], [10.0, 11.0, 12.0]), rank([0, 1, 2], [5.0, 6.5, 8.0])]
    # 2 x 2 steps x 32 images over 2 + 3 CPU seconds
    assert images_per_cpu_second(ranks) == pytest.approx(128 / 5)


def test_every_fusion_setting_is_a_configuration_of_its_own() -> None:
    settings = [FusionSetting(64 * 2**20, 1.0), FusionSetting(2**20, 5.0)]
    found = configs(settings)
    assert [c.key for c in found] == ["a", "b", "c0", "c1", "d"]
    assert (found[0].ranks, found[0].threads) == (None, 2)
    assert (found[1].ranks, found[1].threads) == (1, 2)
    assert all((c.ranks, c.threads) == (2, 1) for c in found[2:4])
    assert (found[4].ranks, found[4].threads, found[4].processes) == (None, 1, 2)
    assert found[3].fusion is not None
    assert found[3].fusion.env() == {"HOROVOD_FUSION_THRESHOLD": "1048576", "HOROVOD_CYCLE_TIME": "5"}
    assert "fusion 1 MiB, cycle 5 ms" in found[3].label


def test_the_floor_rows_judge_the_best_per_cpu_setting_and_split_its_loss() -> None:
    plan = configs([FusionSetting(64 * 2**20, 1.0), FusionSetting(64 * 2**20, 20.0)])
    cpu = {"a": 100.0, "b": 98.0, "c0": 80.0, "c1": 90.0, "d": 99.0}
    best, split, allreduce, idle = floor_rows(cpu, plan, {"c0": 0.02, "c1": 0.016}, {1.0: 0.12, 20.0: 0.013})
    assert best.value == pytest.approx(0.9) and best.meets is False and "cycle 20 ms" in best.detail
    assert split.value == pytest.approx(0.99)
    assert allreduce.value == pytest.approx(0.016 * 90 / 32)  # CPU s per allreduce x steps per CPU second
    assert idle.value == pytest.approx(0.013) and "1 ms 0.120" in idle.detail
