"""The time-to-first-step rows: rank 0's log lines read back, medians per contender, ratios against their targets."""

from __future__ import annotations

import pytest

from .first_step import FLOOR, KUBETRAIN, PEER, Start, log_times, rows

LOG = """[1,0]<stderr>:2026-11-27 18:00:01,000 rank0 INFO trainlib.startup: startup: Horovod's world up at \
2026-11-27T18:00:01.250Z
[1,0]<stderr>:Epoch 1/3
[1,0]<stderr>:2026-11-27 18:00:09,000 rank0 INFO trainlib.startup: startup: first training step done at \
2026-11-27T18:00:08.750Z, 7.5 s after the world was up
"""


def test_the_log_lines_of_rank_0_give_both_times() -> None:
    times = log_times(LOG)
    assert {phase: moment.isoformat() for phase, moment in times.items()} == {
        "world up": "2026-11-27T18:00:01.250000+00:00", "first step": "2026-11-27T18:00:08.750000+00:00"}
    assert log_times("Epoch 1/3\n") == {}


def start(contender: str, total: float, workers: int = 2) -> Start:
    return Start(contender, workers, {"launcher created": total / 2, "first step": total})


def test_rows_give_medians_and_ratios_against_the_targets() -> None:
    table = {row.name: row for row in rows([start(KUBETRAIN, 20), start(KUBETRAIN, 30), start(KUBETRAIN, 22),
                                            start(PEER, 40), start(PEER, 44), start(FLOOR, 15),
                                            start(PEER, 50, workers=4)])}
    assert table["kubetrain: apply -> first step, 2 workers"].value == 22
    assert table["mpi-operator v0.8.0: apply -> first step, 2 workers"].value == 42
    peer = table["kubetrain / mpi-operator v0.8.0: apply -> first step, 2 workers"]
    assert peer.value == pytest.approx(22 / 42) and peer.meets is True and peer.target == "<= 0.8"
    floor = table["kubetrain / floor: apply -> first step, 2 workers"]
    assert floor.value == pytest.approx(22 / 15) and floor.meets is False
    assert "launcher created 11.0" in table["kubetrain: apply -> first step, 2 workers"].detail
    assert "mpi-operator v0.8.0: apply -> first step, 4 workers" in table
    assert not any(name.startswith("kubetrain /") and "4 workers" in name for name in table)  # no kubetrain run there


def test_rows_give_the_median_cpu_each_start_took() -> None:
    starts = [Start(KUBETRAIN, 2, {"first step": 30}, cpu={"controller": cpu, "API server and etcd": 2 * cpu})
              for cpu in (1.0, 3.0, 2.0)]
    detail = rows(starts)[0].detail
    assert detail.endswith("median CPU s from apply to first step: controller 2.0, API server and etcd 4.0"), detail
    assert "CPU" not in rows([start(PEER, 40)])[0].detail  # not measured: not said
