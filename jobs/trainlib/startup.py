"""Rank 0's startup report: when Horovod's world was up and when the first training step was done, sent to
status.progress.startup (the operator puts both in the job's startup timeline, status.startup).

Both go out in one report once the first step is done, on a thread of their own, so that a quick start does not also
load the API client. When the first step is slow to come (WORLD_UP_DELAY_SECONDS after the world is up), the world-up
time goes out alone first: a job stuck in its data or graph tracing then shows it is past Horovod's start. A rank
other than 0, or a run that does not report its status (KUBETRAIN_REPORT_STATUS, KUBETRAIN_ATTEMPT), reports nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from trainlib.progress import ProgressReporter

WORLD_UP_DELAY_SECONDS = 10.0
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class StartupReport:
    """The two times of one attempt's start, and their reports."""

    def __init__(self, reporter: ProgressReporter, attempt: int, clock: Clock = _utc_now,
                 delay: float = WORLD_UP_DELAY_SECONDS) -> None:
        self.reporter = reporter
        self.attempt = attempt
        self.delay = delay
        self.world_up_at: datetime | None = None
        self.first_step_at: datetime | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.sender: threading.Thread | None = None  # the first step's report, once sent

    def world_up(self) -> None:
        """Horovod's world is up now; its report waits for the first step, or `delay` seconds."""
        with self._lock:
            if self.world_up_at is not None:
                return
            self.world_up_at = self._clock()
            self._timer = threading.Timer(self.delay, self._send_world_up)
            self._timer.daemon = True
            self._timer.start()

    def first_step(self) -> None:
        """The first training step is done now: report it with the world-up time (once; later calls do nothing)."""
        if self.first_step_at is not None or self.world_up_at is None:
            return
        with self._lock:
            if self.first_step_at is not None:
                return
            self.first_step_at = self._clock()
            if self._timer is not None:
                self._timer.cancel()
        # Not a daemon: a run that ends soon after its first step still sends it, as its progress reports are sent.
        self.sender = threading.Thread(target=self._send, name="startup-report")
        self.sender.start()

    def _send_world_up(self) -> None:
        with self._lock:
            if self.first_step_at is not None or self.world_up_at is None:
                return
            world_up_at = self.world_up_at
        self.reporter.report_startup(self.attempt, world_up_at)

    def _send(self) -> None:
        assert self.world_up_at is not None
        self.reporter.report_startup(self.attempt, self.world_up_at, self.first_step_at)


_current: StartupReport | None = None


def world_up(rank: int, environ: Mapping[str, str] | None = None) -> StartupReport | None:
    """Call once Horovod's world is up. On rank 0 of a job that reports its status, starts this process's report
    (returned); elsewhere does nothing."""
    global _current
    env = os.environ if environ is None else environ
    attempt = env.get("KUBETRAIN_ATTEMPT", "")
    if rank != 0 or _current is not None or not attempt.isdigit() or env.get("KUBETRAIN_REPORT_STATUS") != "1":
        return None
    reporter = ProgressReporter.from_environment(env)
    if not reporter.enabled:
        return None
    _current = StartupReport(reporter, int(attempt))
    _current.world_up()
    return _current


def first_step() -> None:
    """Call after every training step on rank 0 (or once its first epoch ends): only the first call reports."""
    if _current is not None:
        _current.first_step()
