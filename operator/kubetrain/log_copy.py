"""Copy a failed attempt's launcher log into its ConfigMap (kubetrain.manifests.attempt_log) before the restart deletes
the pod that holds it, then delete the job's copies the new one pushes out (a SaveLog action of kubetrain.sync).

Bounded: at most two reads of the log, READ_BYTES and LOG_READ_SECONDS each, and a list of the job's copies by their
metadata. It never raises: a log that cannot be read, or a copy that cannot be made, is a Warning event, and the
restart goes on."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubetrain import reasons
from kubetrain.api import Job
from kubetrain.cache import owned_by
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_ATTEMPT_LOG, ROLE_LAUNCHER
from kubetrain.kube import Kube, LogUnreadable
from kubetrain.manifests import attempt_log
from kubetrain.plan.model import SaveLog, attempt_of

log = logging.getLogger(__name__)
LOG_READ_SECONDS = 10.0  # the longest one read of a launcher log may take


def save(kube: Kube, training: Mapping[str, Any], job: Job, action: SaveLog) -> None:
    """Copy the end of attempt `action.attempt`'s launcher log, then push out the oldest copies. The copy is not
    remembered as written: the operator's watch leaves copies out (kubetrain.children), no pass reads them."""
    tail = _launcher_tail(kube, job.namespace, action)
    try:
        kube.create(attempt_log.build_attempt_log(job, action.attempt, action.pod, tail), job.uid)
    except Exception as error:  # a name taken, a quota, the operator's RBAC: the restart matters more
        log.warning("%s/%s: attempt %d's launcher log not kept: %s", job.namespace, job.name, action.attempt, error)
        kube.event(training, "Warning", reasons.LOG_NOT_SAVED,
                   f"attempt {action.attempt}'s launcher log was not kept: {error}")
        return
    if not tail.text and tail.note:
        kube.event(training, "Warning", reasons.LOG_NOT_SAVED, f"attempt {action.attempt}: {tail.note}")
    try:
        _push_out(kube, job)
    except Exception as error:  # the next copy tries again; the job's deletion takes them all
        log.warning("%s/%s: older launcher log copies not deleted: %s", job.namespace, job.name, error)


def _launcher_tail(kube: Kube, namespace: str, action: SaveLog) -> attempt_log.Tail:
    """The end of the launcher pod's log, or a note saying why there is none. When the last TAIL_LINES lines are more
    than READ_BYTES, it asks again for as many lines as fit in KEEP_BYTES."""
    if action.pod is None:
        return attempt_log.no_launcher_pod(action.attempt)
    lines = attempt_log.TAIL_LINES
    try:
        raw = kube.read_log(namespace, action.pod, ROLE_LAUNCHER, lines, attempt_log.READ_BYTES, LOG_READ_SECONDS)
        if len(raw) >= attempt_log.READ_BYTES:
            lines = attempt_log.fewer_lines(raw)
            raw = kube.read_log(namespace, action.pod, ROLE_LAUNCHER, lines, attempt_log.READ_BYTES,
                                LOG_READ_SECONDS)
    except LogUnreadable as error:
        return attempt_log.unreadable(action.pod, str(error))
    except Exception as error:  # whatever else goes wrong here must not stop the restart either
        log.exception("reading the log of launcher pod %s/%s", namespace, action.pod)
        return attempt_log.unreadable(action.pod, str(error))
    return attempt_log.tail_of(raw, lines)


def _push_out(kube: Kube, job: Job) -> None:
    """Delete the job's copies older than the newest KEPT_ATTEMPTS (only those it owns)."""
    found = kube.list_metadata("v1", "ConfigMap", job.namespace,
                               f"{LABEL_JOB}={job.name},{LABEL_ROLE}={ROLE_ATTEMPT_LOG}")
    copies = {attempt_of(copy): str(copy["metadata"]["name"]) for copy in found if owned_by(copy, {job.uid})}
    for attempt in attempt_log.pushed_out(copies):
        kube.delete("v1", "ConfigMap", job.namespace, copies[attempt])
