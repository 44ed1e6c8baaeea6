"""Per-job operator latencies from the watch record: children, launcher, and the launcher's reaction to Ready."""

from __future__ import annotations

import pytest

from .latency import Observation, job_latency


def _record(observation: Observation, kind: str, name: str, at: float, job: str, role: str) -> None:
    observation.first_seen[(kind, name)] = at
    observation.labels[(kind, name)] = {"kubetrain.dev/job-name": job, "kubetrain.dev/role": role}


def observed() -> Observation:
    seen = Observation()
    for kind, name, at in (("Secret", "a-ssh", 100.2), ("ConfigMap", "a-hosts", 100.3), ("Service", "a", 100.3),
                           ("Pod", "a-worker-0", 100.4), ("Pod", "a-worker-1", 100.5)):
        _record(seen, kind, name, at, "a", "worker" if kind == "Pod" else "job")
    seen.ready_at.update({"a-worker-0": 100.9, "a-worker-1": 101.0})
    _record(seen, "Job", "a-launcher", 101.25, "a", "launcher")
    _record(seen, "Pod", "a-launcher-x1", 101.4, "a", "launcher")
    _record(seen, "Secret", "b-ssh", 100.1, "b", "job")
    return seen


def test_latencies_of_one_job() -> None:
    latency = job_latency(observed(), "a", submitted=100.0)
    assert latency.children == 5  # the launcher Job and its pod are not children
    assert latency.to_children == pytest.approx(0.5)
    assert latency.to_launcher == pytest.approx(1.25)
    assert latency.ready_to_launcher == pytest.approx(0.25)


def test_any_labelled_kind_but_the_launcher_job_and_its_pods_is_a_child() -> None:
    seen = observed()
    _record(seen, "ServiceAccount", "a-job", 100.6, "a", "job")
    latency = job_latency(seen, "a", submitted=100.0)
    assert latency.children == 6 and latency.to_children == pytest.approx(0.6)


def test_a_job_without_launcher_is_reported_not_measured() -> None:
    with pytest.raises(ValueError, match="job b: .* 0 launcher Jobs"):
        job_latency(observed(), "b", submitted=100.0)


def test_a_worker_never_ready_is_reported() -> None:
    seen = observed()
    del seen.ready_at["a-worker-1"]
    with pytest.raises(ValueError, match="a-worker-1"):
        job_latency(seen, "a", submitted=100.0)
