"""`kubetrain status --watch` and `kubetrain wait`: the lines a sequence of statuses prints and the exit codes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from kubetrain import follow, reasons
from kubetrain.follow import Snapshot
from kubetrain.pod_state import headline_metric

AT = datetime(2026, 5, 1, 10, 0, 3, tzinfo=timezone.utc)


def body(phase: str | None = None, reason: str = "", ready: int = 0, epoch: int | None = None,
         metrics: dict[str, float] | None = None, restarts: int = 0, message: str = "", **extra: Any) -> dict[str, Any]:
    """A DistributedTraining as the API server returns it, with 2 workers and 30 epochs."""
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "reason": reason, "message": message, "restarts": restarts,
                  "workers": {"ready": ready, "total": 2, "summary": f"{ready}/2"}}
    if epoch is not None:
        status["progress"] = {"epoch": epoch, "epochs": 30, "metrics": metrics or {}, "headline": "val_accuracy",
                              **extra}
    return {"metadata": {"name": "cifar", "namespace": "ml"}, "status": status}


def printed(bodies: list[dict[str, Any] | None]) -> list[str]:
    """What `status --watch` prints after the status of bodies[0]: one line per change."""
    first, *rest = [None if b is None else follow.snapshot(b) for b in bodies]
    return [follow.line(s, AT) for s in follow.changes(rest, first) if s is not None]


def test_one_line_per_change_until_the_job_succeeds() -> None:
    bodies = [
        body(),  # not seen by the operator yet
        body("Pending", "WaitingForWorkers"),
        body("Pending", "WaitingForWorkers", message="1 of 2 workers scheduled"),  # only the message: no line
        body("Starting", "WorkersReady", ready=2),
        body("Running", "LauncherRunning", ready=2),
        body("Running", "LauncherRunning", ready=2, epoch=1, metrics={"loss": 1.5, "val_accuracy": 0.41}),
        body("Running", "LauncherRunning", ready=2, epoch=1, metrics={"loss": 1.5, "val_accuracy": 0.41}),
        body("Running", "LauncherRunning", ready=2, epoch=2, metrics={"loss": 1.1, "val_accuracy": 0.55}),
        body("Succeeded", "LauncherSucceeded", epoch=2, metrics={"loss": 1.1, "val_accuracy": 0.55},
             message="the launcher completed"),
        body("Succeeded", "LauncherSucceeded"),  # after the end: never printed
    ]
    assert printed(bodies) == [
        "2026-05-01T10:00:03Z Pending    reason=WaitingForWorkers workers=0/2 restarts=0",
        "2026-05-01T10:00:03Z Starting   reason=WorkersReady workers=2/2 restarts=0",
        "2026-05-01T10:00:03Z Running    reason=LauncherRunning workers=2/2 restarts=0",
        "2026-05-01T10:00:03Z Running    reason=LauncherRunning workers=2/2 epoch=1/30 val_accuracy=0.4100 restarts=0",
        "2026-05-01T10:00:03Z Running    reason=LauncherRunning workers=2/2 epoch=2/30 val_accuracy=0.5500 restarts=0",
        "2026-05-01T10:00:03Z Succeeded  reason=LauncherSucceeded workers=0/2 epoch=2/30 val_accuracy=0.5500 "
        "restarts=0 message: the launcher completed",
    ]


def test_a_restart_and_a_failure_show_the_reason_restarts_and_message() -> None:
    failed = "worker pod cifar-worker-1 failed: OOMKilled (exit code 137); backoffLimit 1 reached"
    bodies = [
        body("Running", "LauncherRunning", ready=2, epoch=3, metrics={"loss": 0.9}),
        body("Restarting", "WorkerFailed", ready=1, epoch=3, metrics={"loss": 0.9}, restarts=1),
        body("Running", "LauncherRunning", ready=2, epoch=3, metrics={"loss": 0.9}, restarts=1),
        body("Failed", "WorkerFailed", ready=1, epoch=3, metrics={"loss": 0.9}, restarts=1, message=failed),
    ]
    lines = printed(bodies)
    assert [line.split()[1] for line in lines] == ["Restarting", "Running", "Failed"]
    assert "reason=WorkerFailed workers=1/2 epoch=3/30 loss=0.9000 restarts=1" in lines[0], "no val_accuracy yet"
    assert lines[-1].endswith(f"restarts=1 message: {failed}")
    assert follow.exit_code(follow.snapshot(bodies[-1])) == follow.EXIT_FAILED


def test_the_metric_is_the_metric_columns() -> None:
    progress = {"epoch": 1, "epochs": 30, "metrics": {"accuracy": 0.5, "loss": 1.2, "val_loss": 1.0},
                "headline": "val_loss"}
    snap = follow.snapshot({"status": {"phase": "Running", "progress": progress}})
    assert snap.metric == headline_metric(progress) == "val_loss=1.0000"
    del progress["headline"]
    assert follow.snapshot({"status": {"phase": "Running", "progress": progress}}).metric == headline_metric(progress)


def test_a_job_already_finished_prints_no_line() -> None:
    assert printed([body("Succeeded", "LauncherSucceeded"), body("Succeeded", "LauncherSucceeded")]) == []


def test_a_deleted_job_ends_the_lines() -> None:
    snaps = [follow.snapshot(body("Running")), None, follow.snapshot(body("Succeeded"))]
    assert list(follow.changes(snaps)) == [snaps[0], None]
    assert follow.exit_code(None) == follow.EXIT_USAGE


@pytest.mark.parametrize(("phase", "code"), [
    (reasons.SUCCEEDED, 0), (reasons.FAILED, 1), (reasons.RUNNING, None), (reasons.SUSPENDED, None),
    (reasons.PENDING, None), (reasons.RESTARTING, None), (reasons.STARTING, None),
])
def test_exit_codes(phase: str, code: int | None) -> None:
    assert follow.exit_code(Snapshot(phase)) == code
    assert Snapshot(phase).finished == (code is not None)


def test_every_terminal_phase_has_an_exit_code() -> None:
    assert set(follow.EXIT_CODES) == set(reasons.TERMINAL_PHASES)
    assert follow.EXIT_TIMEOUT == 124 and follow.EXIT_USAGE == 2


def test_summaries_and_errors_are_one_line_naming_the_job() -> None:
    succeeded = follow.snapshot(body("Succeeded", "LauncherSucceeded", epoch=30, metrics={"val_accuracy": 0.9},
                                     message="the launcher completed"))
    assert follow.summary("ml", "cifar", succeeded) == (
        "ml/cifar Succeeded: LauncherSucceeded: the launcher completed "
        "(workers=0/2, epoch=30/30, val_accuracy=0.9000, restarts=0)")
    running = follow.snapshot(body("Running", "LauncherRunning", ready=2, epoch=3))
    assert follow.timed_out("ml", "cifar", 1, running) == (
        "timed out after 1s waiting for DistributedTraining ml/cifar to finish: it is Running "
        "(workers=2/2, epoch=3/30, restarts=0)")
    assert follow.not_found("ml", "cifar") == "DistributedTraining ml/cifar not found"
    assert "ml/cifar was deleted" in follow.deleted("ml", "cifar")
    pending = follow.snapshot(body())
    assert pending == Snapshot(reasons.PENDING) and follow.summary("ml", "cifar", pending) == \
        "ml/cifar Pending (restarts=0)"
