"""Rank 0's startup report: when Horovod's world was up and when the first training step was done, sent to
status.progress.startup (the operator puts both in the job's startup timeline, status.startup).

Both go out in one report once the first step is done, on a thread of their own, so that the start itself does not
also load the API client: under a CPU limit that would slow rank 0, and every rank waits for rank 0. When the first
step is slow to come (WORLD_UP_DELAY_SECONDS after the world is up, longer than a first step's graph tracing takes on
half a core), the world-up time goes out alone first: a job stuck in its data or graph tracing then shows it is past
Horovod's start. Other reports of the start (which checkpoint it resumed from) wait for the same moment (`defer`);
one still unsent when the process exits is sent then. A rank other than 0 reports nothing. Rank 0 logs both times in
any run (`startup: ...` lines, milliseconds in UTC), so a job run without kubetrain's status, under another launcher
too, shows how long its start took; only a run that reports its status (KUBETRAIN_REPORT_STATUS, KUBETRAIN_ATTEMPT)
sends them.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from trainlib.progress import ProgressReporter
from trainlib.status_payload import rfc3339_ms

log = logging.getLogger(__name__)
WORLD_UP_DELAY_SECONDS = 60.0
Report = Callable[[], object]
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
        self._deferred: list[Report] = []
        self._world_up_sent = False  # the world-up report alone has gone (the deferred ones with it)
        self._flush_at_exit = False

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

    def defer(self, report: Report) -> None:
        """Send `report` with the startup report (at the first step, or the world-up report if that comes first), or
        when the process exits if neither has gone by then."""
        with self._lock:
            sent = self.first_step_at is not None or self._world_up_sent
            if not sent:
                self._deferred.append(report)
                if not self._flush_at_exit:
                    atexit.register(self.flush)
                    self._flush_at_exit = True
        if sent:
            threading.Thread(target=report, name="startup-deferred-report").start()

    def flush(self) -> None:
        """Send the deferred reports not sent yet, here and now."""
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for report in deferred:
            report()

    def _send_world_up(self) -> None:
        assert self.reporter is not None
        with self._lock:
            if self.first_step_at is not None or self.world_up_at is None:
                return
            world_up_at = self.world_up_at
            self._world_up_sent = True
        self.reporter.report_startup(self.attempt, world_up_at)
        self.flush()

    def _send(self) -> None:
        assert self.reporter is not None and self.world_up_at is not None
        self.reporter.report_startup(self.attempt, self.world_up_at, self.first_step_at)
        self.flush()


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


def defer(report: Report) -> None:
    """Send `report`, a report of this attempt's start, with rank 0's startup report; where this process keeps no
    startup report (a run without Horovod's world, or one that does not report), on a thread of its own now."""
    if _current is not None and _current.reporter is not None:
        _current.defer(report)
    else:
        threading.Thread(target=report, name="startup-deferred-report").start()


def first_step() -> None:
    """Call after every training step on rank 0 (or once its first epoch ends): only the first call reports."""
    if _current is not None:
        _current.first_step()
