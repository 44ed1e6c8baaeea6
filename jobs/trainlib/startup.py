"""Rank 0's startup report: when Horovod's world was up and when the first training step was done, sent to
status.progress.startup (the operator puts both in the job's startup timeline, status.startup).

Both go out in one report once the first step is done, on a thread of their own, so that a quick start does not also
load the API client. When the first step is slow to come (WORLD_UP_DELAY_SECONDS after the world is up), the world-up
time goes out alone first: a job stuck in its data or graph tracing then shows it is past Horovod's start. A rank
other than 0 reports nothing. Rank 0 logs both times in any run (`startup: ...` lines, milliseconds in UTC), so a job
run without kubetrain's status, under another launcher too, shows how long its start took; only a run that reports
its status (KUBETRAIN_REPORT_STATUS, KUBETRAIN_ATTEMPT) sends them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from trainlib.progress import ProgressReporter
from trainlib.status_payload import rfc3339_ms

log = logging.getLogger(__name__)
WORLD_UP_DELAY_SECONDS = 10.0
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class StartupReport:
    """The two times of one attempt's start, their log lines, and their reports (none without a reporter)."""

    def __init__(self, reporter: ProgressReporter | None, attempt: int, clock: Clock = _utc_now,
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
            log.info("startup: Horovod's world up at %s", rfc3339_ms(self.world_up_at))
            if self.reporter is None:
                return
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
        log.info("startup: first training step done at %s, %.1f s after the world was up",
                 rfc3339_ms(self.first_step_at), (self.first_step_at - self.world_up_at).total_seconds())
        if self.reporter is None:
            return
        # Not a daemon: a run that ends soon after its first step still sends it, as its progress reports are sent.
        self.sender = threading.Thread(target=self._send, name="startup-report")
        self.sender.start()

    def _send_world_up(self) -> None:
        assert self.reporter is not None
        with self._lock:
            if self.first_step_at is not None or self.world_up_at is None:
                return
            world_up_at = self.world_up_at
        self.reporter.report_startup(self.attempt, world_up_at)

    def _send(self) -> None:
        assert self.reporter is not None and self.world_up_at is not None
        self.reporter.report_startup(self.attempt, self.world_up_at, self.first_step_at)


_current: StartupReport | None = None


def world_up(rank: int, environ: Mapping[str, str] | None = None) -> StartupReport | None:
    """Call once Horovod's world is up. On rank 0, starts (and returns) this process's startup: its log lines, and its
    report in a job that reports its status. Elsewhere does nothing."""
    global _current
    if rank != 0 or _current is not None:
        return None
    env = os.environ if environ is None else environ
    attempt = env.get("KUBETRAIN_ATTEMPT", "")
    reporting = attempt.isdigit() and env.get("KUBETRAIN_REPORT_STATUS") == "1"
    reporter = ProgressReporter.from_environment(env) if reporting else None
    _current = StartupReport(reporter if reporter is not None and reporter.enabled else None,
                             int(attempt) if reporting else 0)
    _current.world_up()
    return _current


def first_step() -> None:
    """Call after every training step on rank 0 (or once its first epoch ends): only the first call reports."""
    if _current is not None:
        _current.first_step()
