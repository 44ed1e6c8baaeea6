"""A pass that fails still reaches the job's status: what cannot clear by waiting fails the job, anything else waits
under a reason that says so, with one event per new message, and is retried."""

from __future__ import annotations

from typing import Any

import pytest
from dtr_bodies import training

from kubetrain import reasons
from kubetrain.cache import Snapshot, Written
from kubetrain.kube import ChildRefused
from kubetrain.refusals import not_served
from kubetrain.runtime.queue import RetryLater
from kubetrain.sync import sync_training
from tests.support.recording_kube import RecordingKube


def failing(error: Exception) -> RecordingKube:
    """Every create fails with `error`."""
    return RecordingKube(training(), refuse=lambda obj: error)


def run_pass(kube: RecordingKube, status: dict[str, Any] | None = None) -> float | None:
    body = {**training(), "status": status or {}}
    return sync_training(kube, Written(), Snapshot(body, {}), None)  # type: ignore[arg-type]


def test_an_error_the_operator_does_not_know_waits_under_sync_failed_and_says_it_once() -> None:
    kube = failing(ConnectionResetError("connection reset by peer"))
    with pytest.raises(RetryLater):
        run_pass(kube)
    status = kube.statuses[-1]
    assert status["reason"] == reasons.SYNC_FAILED and status.get("phase") != reasons.FAILED
    assert "ConnectionResetError: connection reset by peer" in status["message"]
    assert "Retrying with backoff" in status["message"]
    assert kube.events == [("Warning", reasons.SYNC_FAILED, status["message"])]

    with pytest.raises(RetryLater):  # the same failure again: no second status write, no second event
        run_pass(kube, status)
    assert len(kube.statuses) == 1 and len(kube.events) == 1


def test_a_kind_the_cluster_does_not_serve_fails_the_job_naming_the_field() -> None:
    kube = failing(ChildRefused(not_served("scheduling.volcano.sh/v1beta1", "PodGroup", "cifar-workers")))
    assert run_pass(kube) is None
    status = kube.statuses[-1]
    assert (status["phase"], status["reason"]) == (reasons.FAILED, reasons.KIND_NOT_SERVED)
    assert "does not serve PodGroup (scheduling.volcano.sh/v1beta1)" in status["message"]
    assert "Change spec.scheduling.gang.scheduler" in status["message"]
    assert [event[:2] for event in kube.events] == [("Warning", reasons.KIND_NOT_SERVED)]
