"""Progress reports: the status patch body (pure) and the reporter's on/off and never-fatal behaviour."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from trainlib.progress import ProgressReporter
from trainlib.status_payload import build_status_patch

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(("kwargs", "expected"), [
    (dict(epoch=3, epochs=30, step=4690, metrics={"loss": 0.5, "accuracy": 0.75}),
     {"status": {"progress": {"epoch": 3, "epochs": 30, "step": 4690, "metrics": {"loss": 0.5, "accuracy": 0.75},
                              "updatedAt": "2024-05-01T12:00:00Z"}}}),
    (dict(epoch=1, epochs=2, step=10, metrics={"loss": float("nan"), "lr": 1, "name": "x"},
          checkpoint_path="/checkpoints/ns/job/ckpt-000001.h5", checkpoint_epoch=1),
     {"status": {"progress": {"epoch": 1, "epochs": 2, "step": 10, "metrics": {"lr": 1.0},
                              "updatedAt": "2024-05-01T12:00:00Z"},
                 "checkpoint": {"path": "/checkpoints/ns/job/ckpt-000001.h5", "epoch": 1}}}),
])
def test_patch_body(kwargs, expected):
    assert build_status_patch(updated_at=NOW, **kwargs) == expected


def test_timestamps_are_converted_to_utc():
    body = build_status_patch(epoch=1, epochs=1, step=1, metrics={},
                              updated_at=datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))))
    assert body["status"]["progress"]["updatedAt"] == "2024-05-01T12:00:00Z"


def test_reporting_is_off_without_the_switch_and_says_so_once(caplog):
    caplog.set_level(logging.INFO)
    reporter = ProgressReporter.from_environment({"KUBETRAIN_NAMESPACE": "ns", "KUBETRAIN_JOB_NAME": "job"})
    assert not reporter.enabled
    assert reporter.report(epoch=1, epochs=2, step=3, metrics={}) is False
    assert [record.message for record in caplog.records] == [
        "progress reporting is off (KUBETRAIN_REPORT_STATUS is not 1); writing history files only"]


def test_switch_without_job_identity_stays_off_with_a_warning(caplog):
    reporter = ProgressReporter.from_environment({"KUBETRAIN_REPORT_STATUS": "1"})
    assert not reporter.enabled
    assert "KUBETRAIN_NAMESPACE/KUBETRAIN_JOB_NAME are unset" in caplog.text


def test_sends_the_patch_for_its_job_naming_the_programs_headline_metric():
    sent = []
    reporter = ProgressReporter("team-a", "cifar", lambda namespace, name, body: sent.append((namespace, name, body)),
                                headline="val_accuracy")
    assert reporter.report(epoch=2, epochs=5, step=20, metrics={"loss": 1.5, "val_accuracy": 0.5}, now=NOW) is True
    [(namespace, name, body)] = sent
    assert (namespace, name) == ("team-a", "cifar")
    assert body["status"]["progress"]["headline"] == "val_accuracy"
    assert body["status"]["progress"]["metrics"] == {"loss": 1.5, "val_accuracy": 0.5}


def test_api_failures_are_logged_once_and_never_raised(caplog):
    calls = []

    def refuse(namespace, name, body):
        calls.append(body)
        raise ConnectionError("apiserver unreachable")

    reporter = ProgressReporter("ns", "job", refuse)
    for epoch in range(3):
        assert reporter.report(epoch=epoch, epochs=3, step=epoch, metrics={}) is False
    assert len(calls) == 3
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["could not report progress to ns/job (training continues): "
                        "ConnectionError: apiserver unreachable"]


def test_the_resume_patch_names_the_checkpoint_and_its_writer_and_a_fresh_start_clears_it():
    from trainlib.resume_policy import Written
    from trainlib.status_payload import build_resume_patch

    resumed = Written("/checkpoints/ns/job/ckpt-000002.h5", 2, "2024-05-01T11:00:00Z", "uid-1")
    assert build_resume_patch(resumed) == {"status": {"checkpoint": {"resumedFrom": {
        "path": "/checkpoints/ns/job/ckpt-000002.h5", "epoch": 2, "writtenAt": "2024-05-01T11:00:00Z",
        "jobUID": "uid-1"}}}}
    assert build_resume_patch(None) == {"status": {"checkpoint": {"resumedFrom": None}}}
