"""Rank 0's progress reports to the DistributedTraining status, switched on by KUBETRAIN_REPORT_STATUS=1.

Reporting never stops training: failures are logged (once per distinct error) and the run goes on. Outside Kubernetes,
or with reporting off, the reporter is a no-op that says so in one log line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone

from trainlib.resume_policy import Written
from trainlib.status_payload import build_resume_patch, build_startup_patch, build_status_patch

log = logging.getLogger(__name__)

Patcher = Callable[[str, str, dict], None]


class ProgressReporter:
    """Sends `status.progress` (and `status.checkpoint`) patches for one DistributedTraining."""

    def __init__(self, namespace: str | None, name: str | None, patch: Patcher | None = None,
                 headline: str | None = None) -> None:
        self.namespace = namespace
        self.name = name
        self.headline = headline  # the metric the program is judged by, e.g. val_accuracy
        self._patch = patch
        self._last_error: str | None = None

    @property
    def enabled(self) -> bool:
        return self._patch is not None and bool(self.namespace) and bool(self.name)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, headline: str | None = None
                         ) -> ProgressReporter:
        """Reporter configured from KUBETRAIN_REPORT_STATUS, KUBETRAIN_NAMESPACE and KUBETRAIN_JOB_NAME; `headline`
        is the program's own."""
        env = os.environ if environ is None else environ
        namespace, name = env.get("KUBETRAIN_NAMESPACE"), env.get("KUBETRAIN_JOB_NAME")
        if env.get("KUBETRAIN_REPORT_STATUS") != "1":
            log.info("progress reporting is off (KUBETRAIN_REPORT_STATUS is not 1); writing history files only")
            return cls(namespace, name, None, headline)
        if not namespace or not name:
            log.warning("KUBETRAIN_REPORT_STATUS=1 but KUBETRAIN_NAMESPACE/KUBETRAIN_JOB_NAME are unset; "
                        "progress reporting is off")
            return cls(namespace, name, None, headline)
        from trainlib.kube_status import patch_status

        log.info("reporting progress to DistributedTraining %s/%s", namespace, name)
        return cls(namespace, name, patch_status, headline)

    def report(self, *, epoch: int, epochs: int, step: int, metrics: Mapping[str, object],
               checkpoint_path: str | None = None, checkpoint_epoch: int | None = None,
               history: Iterable[Mapping[str, object]] = (), now: datetime | None = None) -> bool:
        """Patch the status; True when the API accepted it, False when off or failed (logged, never raised).

        `history` is the run's earlier epochs as history.json holds them (`HistoryLog.records`). After a resume they
        include the epochs of the attempts before, so status.progress.history starts at epoch 1.
        """
        if not self.enabled or self._patch is None:
            return False
        body = build_status_patch(epoch=epoch, epochs=epochs, step=step, metrics=metrics,
                                  updated_at=now or datetime.now(timezone.utc), checkpoint_path=checkpoint_path,
                                  checkpoint_epoch=checkpoint_epoch, headline=self.headline, history=history)
        return self._send(body)

    def report_resume(self, resumed: Written | None) -> bool:
        """Say which checkpoint this attempt resumed from (status.checkpoint.resumedFrom), or that it started fresh."""
        if not self.enabled:
            return False
        return self._send(build_resume_patch(resumed))

    def report_startup(self, attempt: int, world_up_at: datetime, first_step_at: datetime | None = None) -> bool:
        """Say when Horovod's world was up and the first training step done (status.progress.startup)."""
        if not self.enabled:
            return False
        return self._send(build_startup_patch(attempt=attempt, world_up_at=world_up_at, first_step_at=first_step_at))

    def _send(self, body: dict) -> bool:
        if self._patch is None:
            return False
        try:
            self._patch(str(self.namespace), str(self.name), body)
        except Exception as error:  # any API or network failure must not stop training
            message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            if message != self._last_error:
                log.warning("could not report progress to %s/%s (training continues): %s", self.namespace,
                            self.name, message)
                self._last_error = message
            return False
        self._last_error = None
        return True
