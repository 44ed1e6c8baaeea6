"""kubetrain / peer ratios at the target size: the median of side-by-side pairs, so one noisy round decides nothing."""

from __future__ import annotations

import pytest

from .latency import JobLatency
from .operator_latency import COLD_JOBS, TARGET_JOBS, RoundResult, cold_rows, ratio_rows


def result(who: str, cpu: float, rss: float = 100.0, p99: float = 10.0, jobs: int = TARGET_JOBS) -> RoundResult:
    latency = JobLatency("job-0", children=5, to_children=p99, to_launcher=p99 + 1, ready_to_launcher=0.5)
    return RoundResult(who, jobs, [latency], operator_requests_per_job=12.0, all_requests_per_job=30.0,
                       cpu_seconds_per_job=cpu, peak_rss_mib=rss, syncs_per_job=None, mean_sync_seconds=None,
                       children=[])


def by_name(pairs: list[tuple[RoundResult, RoundResult]]) -> dict[str, float]:
    return {row.name.split(": ")[1].rsplit(",", 1)[0]: row.value for row in ratio_rows(pairs, tuned=True)}


def test_one_slow_peer_round_does_not_decide_the_cpu_ratio() -> None:
    pairs = [(result("kt", 0.025), result("peer", 0.020)), (result("kt", 0.026), result("peer", 0.012)),
             (result("kt", 0.024), result("peer", 0.019))]
    ratios = by_name(pairs)
    assert ratios["CPU seconds per job"] == pytest.approx(0.024 / 0.019)  # pairs: 1.25, 2.17, 1.26
    cpu = next(row for row in ratio_rows(pairs, tuned=True) if "CPU" in row.name)
    assert cpu.meets and "median of 3 pairs" in cpu.detail


def test_a_ratio_over_the_bound_in_most_pairs_misses_the_target() -> None:
    pairs = [(result("kt", 0.03), result("peer", 0.015)), (result("kt", 0.03), result("peer", 0.025)),
             (result("kt", 0.03), result("peer", 0.016))]
    cpu = next(row for row in ratio_rows(pairs, tuned=True) if "CPU" in row.name)
    assert cpu.value == pytest.approx(0.03 / 0.016) and cpu.meets is False


def test_the_latency_ratio_shows_every_pairs_seconds() -> None:
    pairs = [(result("kt", 0.02, p99=11.05), result("peer", 0.02, p99=9.594)),
             (result("kt", 0.02, p99=6.388), result("peer", 0.02, p99=7.846))]
    latency = next(row for row in ratio_rows(pairs, tuned=True) if "all children" in row.name)
    assert latency.detail == "median of 2 pairs: 11.05 s vs 9.594 s; 6.388 s vs 7.846 s"


def test_a_cold_start_is_judged_at_fifty_jobs_against_the_tuned_peers_cold_start() -> None:
    late = cold_rows(result("kubetrain", 0.02, p99=5.56, jobs=COLD_JOBS),
                     result("peer", 0.02, p99=2.47, jobs=COLD_JOBS))
    assert [row.name for row in late] == ["kubetrain at its start: create -> all children, 50 jobs at once (p99)",
                                          "peer at its start: create -> all children, 50 jobs at once (p99)",
                                          "kubetrain / peer at their start: create -> all children p99, 50 jobs"]
    assert late[2].value == pytest.approx(5.56 / 2.47) and late[2].meets is False
    small = cold_rows(result("kubetrain", 0.02, p99=3.0, jobs=5), result("peer", 0.02, p99=1.0, jobs=5))
    assert small[2].meets is None  # 5 jobs: a smoke test of the path, not a target
