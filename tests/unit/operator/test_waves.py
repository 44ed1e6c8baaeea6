"""The order a pass writes in: independent writes together, a gang's pods after their PodGroup, the launcher
last."""

from __future__ import annotations

from datetime import datetime

from dtr_bodies import training

from kubetrain.api import parse_job
from kubetrain.plan import Children, Create, CreateSshSecret, Delete, decide
from kubetrain.sync import waves

NOW = datetime(2026, 11, 22, 12, 0, 0)


def kinds(wave: list) -> list[str]:
    return sorted(a.obj["kind"] if isinstance(a, Create) else type(a).__name__ for a in wave)


def test_a_new_job_writes_its_config_and_workers_together() -> None:
    plan = decide(parse_job(training()), {}, Children(), NOW)
    assert [kinds(wave) for wave in waves(plan.actions)] == [sorted(["ConfigMap", "CreateSshSecret", "Service", "Pod",
                                                                     "Pod"])]


def test_a_gangs_workers_wait_for_their_pod_group() -> None:
    plan = decide(parse_job(training(scheduling={"gang": {"scheduler": "Volcano"}})), {}, Children(), NOW)
    group, rest = waves(plan.actions)
    assert kinds(group) == ["PodGroup"] and "Pod" in kinds(rest)


def test_deletions_come_before_creations_and_the_launcher_last() -> None:
    pod = Create({"kind": "Pod"})
    launcher = Create({"kind": "Job"})
    stale = Delete("v1", "Pod", "old-worker-0")
    group = Create({"kind": "PodGroup"})
    assert waves([launcher, pod, stale, CreateSshSecret(), group]) == [[group], [stale], [pod, CreateSshSecret()],
                                                                       [launcher]]
