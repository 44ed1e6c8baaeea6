"""Progress reports: the status patch body (pure) with its bounded history, which the CRD admits, and the reporter's
on/off and never-fatal behaviour."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import jsonschema
import pytest

from kubetrain.schema import crd_schema
from trainlib.progress import ProgressReporter
from trainlib.status_payload import HISTORY_EPOCHS, build_status_patch

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(("kwargs", "expected"), [
    (dict(epoch=3, epochs=30, step=4690, metrics={"loss": 0.5, "accuracy": 0.75},
          history=[{"epoch": 1, "loss": 0.9, "accuracy": 0.5}, {"epoch": 2, "loss": 0.7, "accuracy": 0.6}]),
     {"status": {"progress": {"epoch": 3, "epochs": 30, "step": 4690, "metrics": {"loss": 0.5, "accuracy": 0.75},
                              "history": [{"epoch": 1, "metrics": {"loss": 0.9, "accuracy": 0.5}},
                                          {"epoch": 2, "metrics": {"loss": 0.7, "accuracy": 0.6}},
                                          {"epoch": 3, "metrics": {"loss": 0.5, "accuracy": 0.75}}],
                              "updatedAt": "2024-05-01T12:00:00Z"}}}),
    (dict(epoch=1, epochs=2, step=10, metrics={"loss": float("nan"), "lr": 1, "name": "x"},
          checkpoint_path="/checkpoints/ns/job/ckpt-000001.h5", checkpoint_epoch=1),
     {"status": {"progress": {"epoch": 1, "epochs": 2, "step": 10, "metrics": {"lr": 1.0},
                              "history": [{"epoch": 1, "metrics": {"lr": 1.0}}],
                              "updatedAt": "2024-05-01T12:00:00Z"},
                 "checkpoint": {"path": "/checkpoints/ns/job/ckpt-000001.h5", "epoch": 1}}}),
])
def test_patch_body(kwargs, expected):
    assert build_status_patch(updated_at=NOW, **kwargs) == expected


def history_of(epoch: int, records: list[dict]) -> list[dict]:
    body = build_status_patch(epoch=epoch, epochs=500, step=epoch, metrics={"loss": 1.0 / epoch}, updated_at=NOW,
                              history=records)
    return body["status"]["progress"]["history"]


def test_the_history_holds_the_last_epochs_in_order_ending_with_this_one():
    records = [{"epoch": epoch, "loss": 1.0 / epoch} for epoch in range(HISTORY_EPOCHS + 49, 0, -1)]  # any order
    history = history_of(HISTORY_EPOCHS + 50, records)
    assert [entry["epoch"] for entry in history] == list(range(51, HISTORY_EPOCHS + 51))
    assert history[-1] == {"epoch": HISTORY_EPOCHS + 50, "metrics": {"loss": 1.0 / (HISTORY_EPOCHS + 50)}}


def test_the_history_leaves_out_metrics_that_are_not_finite_and_records_that_are_no_epoch():
    records = [{"epoch": 1, "loss": float("inf"), "accuracy": 0.5}, {"epoch": 2, "loss": float("nan")},
               {"loss": 0.1}, {"epoch": "3", "loss": 0.1}, {"epoch": 0, "loss": 0.1}]
    assert history_of(3, records) == [{"epoch": 1, "metrics": {"accuracy": 0.5}}, {"epoch": 2, "metrics": {}},
                                      {"epoch": 3, "metrics": {"loss": 1.0 / 3}}]


def test_records_of_this_epoch_and_later_are_not_this_runs():
    """A resumed run trains epoch 3 again: the killed attempt's records of epochs 3 and 4 are replaced."""
    records = [{"epoch": epoch, "loss": 9.0} for epoch in (1, 2, 3, 4)]
    assert history_of(3, records) == [{"epoch": 1, "metrics": {"loss": 9.0}}, {"epoch": 2, "metrics": {"loss": 9.0}},
                                      {"epoch": 3, "metrics": {"loss": 1.0 / 3}}]


def status_schema_errors(status: dict) -> list[str]:
    """What the CRD's status schema refuses in `status` (the API server's structural checks, via jsonschema)."""
    schema = crd_schema()["properties"]["status"]
    return [error.message for error in jsonschema.Draft4Validator(schema).iter_errors(status)]


def test_the_crd_admits_the_status_rank_zero_sends():
    records = [{"epoch": epoch, "loss": 1.0 / epoch, "accuracy": 0.5} for epoch in range(1, 300)]
    body = build_status_patch(epoch=300, epochs=300, step=3000, metrics={"loss": 0.1, "accuracy": float("nan")},
                              updated_at=NOW, checkpoint_path="/checkpoints/ns/job/ckpt-000300.h5",
                              checkpoint_epoch=300, headline="accuracy", history=records)
    assert status_schema_errors(body["status"]) == []


def test_the_api_server_bounds_the_history_at_the_reporters_length():
    """The CRD's maxItems and HISTORY_EPOCHS are one number written twice; a longer list is refused."""
    history = crd_schema()["properties"]["status"]["properties"]["progress"]["properties"]["history"]
    assert history["maxItems"] == HISTORY_EPOCHS
    entries = [{"epoch": epoch, "metrics": {"loss": 1.0}} for epoch in range(1, HISTORY_EPOCHS + 2)]
    assert status_schema_errors({"progress": {"history": entries}}) == [f"{entries!r} is too long"]
    assert status_schema_errors({"progress": {"history": [{"epoch": 0, "metrics": {}}]}})
    assert status_schema_errors({"progress": {"history": [{"epoch": 1}]}})
    assert status_schema_errors({"progress": {"history": [{"epoch": 1, "metrics": {"loss": "low"}}]}})


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
    assert body["status"]["progress"]["history"] == [{"epoch": 2, "metrics": {"loss": 1.5, "val_accuracy": 0.5}}]


def test_a_report_sends_the_earlier_epochs_it_is_given():
    sent = []
    reporter = ProgressReporter("ns", "job", lambda namespace, name, body: sent.append(body))
    reporter.report(epoch=2, epochs=5, step=20, metrics={"loss": 0.5}, history=[{"epoch": 1, "loss": 1.0}], now=NOW)
    assert [entry["epoch"] for entry in sent[0]["status"]["progress"]["history"]] == [1, 2]


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
