"""Status times as RFC 3339 allows them, and times the operator cannot read: ignored, replaced by its own, said once."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from dtr_bodies import training
from test_plan import NOW, config_children, launcher, worker

from kubetrain import reasons as r
from kubetrain.api import parse_job
from kubetrain.plan import Children, DeleteTraining, decide
from kubetrain.plan.model import parse_time


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1)),
    ("2026-01-01T00:00:00.5Z", datetime(2026, 1, 1, 0, 0, 0, 500000)),
    ("2026-01-01T00:00:00.123456789Z", datetime(2026, 1, 1, 0, 0, 0, 123456)),
    ("2026-01-01T01:30:00+01:30", datetime(2026, 1, 1)),
    ("2025-12-31T23:00:00.25-01:00", datetime(2026, 1, 1, 0, 0, 0, 250000)),
    ("2026-01-01t00:00:00z", datetime(2026, 1, 1)),
])
def test_every_rfc_3339_time_is_read_as_utc(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["2026-01-01T00:00:00x5Z", "2026-01-01 00:00:00Z", "2026-13-01T00:00:00Z",
                                  "2026-01-01T00:00:60Z", "2026-01-01T00:00:00", "yesterday"])
def test_anything_else_is_not_a_time(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def running_world() -> tuple:
    job = parse_job(training(runPolicy={"activeDeadlineSeconds": 3600}))
    batch, pod = launcher(job)
    return job, Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))


def test_a_fractional_start_time_counts_toward_the_deadline() -> None:
    job, children = running_world()
    status = {"phase": r.RUNNING, "startTime": "2026-11-21T10:59:59.5Z"}
    plan = decide(job, status, children, NOW)
    assert plan.status["reason"] == r.DEADLINE_EXCEEDED
    plan = decide(job, {**status, "startTime": "2026-11-21T12:00:30.25+01:00"}, children, NOW)
    assert plan.status["phase"] == r.RUNNING and plan.requeue_after == pytest.approx(30.25)
    assert not plan.events


def test_an_unreadable_start_time_is_replaced_and_said_once() -> None:
    job, children = running_world()
    status = {"phase": r.RUNNING, "startTime": "2026-11-21T10:00:00x5Z"}
    plan = decide(job, status, children, NOW)
    assert plan.status["phase"] == r.RUNNING and plan.status["startTime"] == "2026-11-21T12:00:00Z"
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", r.STATUS_UNREADABLE)]
    assert "status.startTime '2026-11-21T10:00:00x5Z'" in plan.events[0].message
    again = decide(job, {**status, **plan.status}, children, NOW + timedelta(seconds=5))
    assert again.events == [] and again.status["startTime"] == "2026-11-21T12:00:00Z"


def test_an_unreadable_completion_time_restarts_the_ttl_from_now() -> None:
    job = parse_job(training(runPolicy={"ttlSecondsAfterFinished": 60}))
    done = {"phase": r.SUCCEEDED, "completionTime": "2026-11-21T11:00:00x0Z"}
    plan = decide(job, done, Children(), NOW)
    assert DeleteTraining() not in plan.actions and plan.requeue_after == 60
    assert plan.status == {"completionTime": "2026-11-21T12:00:00Z"} and len(plan.events) == 1
    later = decide(job, {**done, **plan.status}, Children(), NOW + timedelta(seconds=61))
    assert later.actions == [DeleteTraining()] and [e.reason for e in later.events] == [r.TTL_EXPIRED]


def test_an_unreadable_condition_time_is_replaced() -> None:
    job, children = running_world()
    condition = {"type": r.COND_RUNNING, "status": "True", "reason": r.LAUNCHER_RUNNING,
                 "message": "the launcher is running mpirun on every worker", "lastTransitionTime": "soon"}
    plan = decide(job, {"phase": r.RUNNING, "startTime": "2026-11-21T11:59:00Z", "conditions": [condition]},
                  children, NOW)
    running = next(c for c in plan.status["conditions"] if c["type"] == r.COND_RUNNING)
    assert running["lastTransitionTime"] == "2026-11-21T12:00:00Z"
    assert [e.reason for e in plan.events] == [r.STATUS_UNREADABLE]
