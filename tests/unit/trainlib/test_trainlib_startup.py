"""Rank 0's startup report: one patch with both times after a quick first step, the world-up time alone first when
the first step is slow, a body the CRD admits, nothing from other ranks or runs that do not report, and both times in
rank 0's log in any run."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone

import jsonschema

from kubetrain.schema import crd_schema
from trainlib import startup
from trainlib.progress import ProgressReporter
from trainlib.startup import StartupReport
from trainlib.status_payload import build_startup_patch

T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)


class Clock:
    """Each reading is one and a half seconds after the one before."""

    def __init__(self) -> None:
        self.now = T0 - timedelta(seconds=1.5)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1.5)
        return self.now


def recording_reporter() -> tuple[ProgressReporter, list[dict], threading.Event]:
    sent: list[dict] = []
    arrived = threading.Event()

    def patch(namespace: str, name: str, body: dict) -> None:
        sent.append(body["status"]["progress"]["startup"])
        arrived.set()

    return ProgressReporter("ml", "cifar", patch), sent, arrived


def test_a_quick_first_step_sends_both_times_in_one_report() -> None:
    reporter, sent, _ = recording_reporter()
    report = StartupReport(reporter, attempt=2, clock=Clock(), delay=60)
    report.world_up()
    report.first_step()
    report.first_step()  # every later step: nothing more
    assert report.sender is not None
    report.sender.join(10)
    assert sent == [{"attempt": 2, "worldUpAt": "2024-05-01T12:00:00.250Z", "firstStepAt": "2024-05-01T12:00:01.750Z"}]


def test_a_slow_first_step_sends_the_world_up_time_alone_first() -> None:
    reporter, sent, arrived = recording_reporter()
    report = StartupReport(reporter, attempt=0, clock=Clock(), delay=0.05)
    report.world_up()
    assert arrived.wait(10), "no world-up report after the delay"
    report.first_step()
    assert report.sender is not None
    report.sender.join(10)
    assert sent == [{"attempt": 0, "worldUpAt": "2024-05-01T12:00:00.250Z", "firstStepAt": None},
                    {"attempt": 0, "worldUpAt": "2024-05-01T12:00:00.250Z",
                     "firstStepAt": "2024-05-01T12:00:01.750Z"}]


def test_the_crd_admits_the_report() -> None:
    schema = crd_schema()["properties"]["status"]
    body = build_startup_patch(attempt=1, world_up_at=T0, first_step_at=T0 + timedelta(seconds=3))
    jsonschema.validate(body["status"], schema)
    assert body["status"]["progress"]["startup"]["firstStepAt"] == "2024-05-01T12:00:03.250Z"


def test_only_rank_0_of_a_job_that_reports_its_status_sends_one(monkeypatch) -> None:
    env = {"KUBETRAIN_REPORT_STATUS": "1", "KUBETRAIN_NAMESPACE": "ml", "KUBETRAIN_JOB_NAME": "cifar",
           "KUBETRAIN_ATTEMPT": "0"}
    monkeypatch.setattr(startup, "_current", None)
    assert startup.world_up(1, env) is None
    for silent in ({**env, "KUBETRAIN_REPORT_STATUS": "0"}, {**env, "KUBETRAIN_ATTEMPT": "first"},
                   {key: value for key, value in env.items() if key != "KUBETRAIN_ATTEMPT"}):
        monkeypatch.setattr(startup, "_current", None)
        report = startup.world_up(0, silent)
        assert report is not None and report.reporter is None, silent
        startup.first_step()
        assert report.sender is None, silent  # timed and logged, never sent


def test_rank_0_logs_both_times_in_any_run(caplog) -> None:
    report = StartupReport(None, attempt=0, clock=Clock(), delay=0.01)
    with caplog.at_level(logging.INFO, logger="trainlib.startup"):
        report.world_up()
        report.first_step()
        report.first_step()
    assert [record.getMessage() for record in caplog.records] == [
        "startup: Horovod's world up at 2024-05-01T12:00:00.250Z",
        "startup: first training step done at 2024-05-01T12:00:01.750Z, 1.5 s after the world was up"]
    assert report.sender is None


def test_a_deferred_report_goes_out_after_the_startup_report() -> None:
    reporter, sent, _ = recording_reporter()
    report = StartupReport(reporter, attempt=0, clock=Clock(), delay=60)
    report.world_up()
    report.defer(lambda: sent.append({"resumed": "ckpt-000003"}))
    assert sent == [], "a deferred report must wait for the first step"
    report.first_step()
    assert report.sender is not None
    report.sender.join(10)
    assert [list(body) for body in sent] == [["attempt", "worldUpAt", "firstStepAt"], ["resumed"]]


def test_a_deferred_report_goes_out_with_the_world_up_report_when_that_comes_first() -> None:
    reporter, sent, arrived = recording_reporter()
    report = StartupReport(reporter, attempt=0, clock=Clock(), delay=60)
    report.world_up()
    resumed = threading.Event()
    report.defer(resumed.set)
    report._send_world_up()  # the timer's call, made now
    assert arrived.is_set() and resumed.is_set()
    late = threading.Event()
    report.defer(late.set)  # deferred after the world-up report: sent at once
    assert late.wait(10)


def test_a_deferred_report_is_sent_when_no_first_step_comes() -> None:
    reporter, sent, _ = recording_reporter()
    report = StartupReport(reporter, attempt=0, clock=Clock(), delay=60)
    report.world_up()
    resumed: list[str] = []
    report.defer(lambda: resumed.append("sent"))
    report.flush()  # what exit does
    report.flush()
    assert resumed == ["sent"] and sent == []


def test_a_process_without_a_startup_report_sends_deferred_reports_at_once(monkeypatch) -> None:
    monkeypatch.setattr(startup, "_current", None)
    done = threading.Event()
    startup.defer(done.set)
    assert done.wait(10)
