"""One reconcile pass for one DistributedTraining: decide (kubetrain.plan) on a cache snapshot, apply, write through.

The pass reads nothing from the API server: every call it makes is a write. What it writes (children it creates, the
status it patches) goes into `Written`, so the next pass sees it even before the watch delivers it. Events are
posted after the children are created, never in their way. A failed attempt's launcher log is copied before the pods
that hold it are deleted (SaveLog, kubetrain.log_copy: the pass's only reads, never in a restart's way)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, wait
from datetime import datetime, timezone
from typing import Any

from kubetrain import log_copy, reasons
from kubetrain.api import Job, SpecError, parse_job
from kubetrain.cache import TRAININGS, Snapshot, Written
from kubetrain.children import BY_KIND
from kubetrain.contract import ENTRYPOINTS_IMAGE
from kubetrain.keys import generate_job_keys
from kubetrain.kube import ChildConflict, ChildRefused, Kube
from kubetrain.manifests.gang import release_patch
from kubetrain.manifests.ssh import build_ssh_secret
from kubetrain.metrics import record_transition
from kubetrain.plan import (
    Action,
    Children,
    Create,
    CreateSshSecret,
    Delete,
    DeleteTraining,
    Patch,
    Plan,
    ReleaseGang,
    SaveLog,
    decide,
    phase,
    status_changed,
)
from kubetrain.refusals import Refusal, sync_failed
from kubetrain.runtime.queue import RetryLater

log = logging.getLogger(__name__)
CONFLICT_REQUEUE_SECONDS = 30.0


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def sync_training(kube: Kube, written: Written, snapshot: Snapshot, pool: Executor | None = None,
                  entrypoints_image: str = ENTRYPOINTS_IMAGE) -> float | None:
    """Converge one job; returns seconds until it should be looked at again (None: only on the next event).
    Writes that do not depend on each other go out together through `pool` (one by one without it)."""
    body = snapshot.training
    if body["metadata"].get("deletionTimestamp"):
        return None
    status: dict[str, Any] = body.get("status") or {}
    now = utcnow()
    writer = Writer(kube, written, body, pool)
    try:
        job = parse_job(body, entrypoints_image, admitted=True)
    except SpecError as error:
        _fail(writer, status, reasons.INVALID_SPEC, f"invalid spec: {error}", now)
        return None
    plan: Plan | None = None
    try:
        children = Children(**snapshot.children, departed=snapshot.departed, workloads=snapshot.workloads)
        plan = decide(job, status, children, now)
        _apply(writer, status, plan, job)
    except ChildRefused as refused:  # what the parser could not foresee
        refusal = refused.refusal
    except ChildConflict as conflict:
        writer.status(status, phase.conflicted(status, str(conflict), now))
        writer.event(reasons.CHILD_CONFLICT, str(conflict), "Warning")
        return CONFLICT_REQUEUE_SECONDS
    except Exception as error:  # anything else still reaches the job's status, once per message
        refusal = sync_failed(error)
        if status.get("message") != refusal.message:
            log.exception("%s/%s: %s", body["metadata"]["namespace"], body["metadata"]["name"], refusal.message)
    else:
        return plan.requeue_after
    if not refusal.retry:  # fail once, loudly, instead of retrying
        _fail(writer, status, refusal.reason, refusal.message, now)
        return None
    _wait(writer, status, plan.status if plan else {}, refusal, now)
    raise RetryLater(refusal.message) from None


class Writer:
    """This pass's writes for one job: each goes to the API server and, where the next pass must see it, into
    `Written`."""

    def __init__(self, kube: Kube, written: Written, body: dict[str, Any], pool: Executor | None = None) -> None:
        self.kube = kube
        self.written = written
        self.body = body
        self.pool = pool

    def together(self, calls: list[Callable[[], None]]) -> None:
        """Run independent writes at once; wait for all, then raise the first error."""
        if self.pool is None or len(calls) < 2:
            for call in calls:
                call()
            return
        futures = [self.pool.submit(call) for call in calls]
        wait(futures)
        for future in futures:
            future.result()

    def create(self, obj: dict[str, Any], owner_uid: str) -> None:
        created = self.kube.create(obj, owner_uid)
        kind = BY_KIND.get((obj["apiVersion"], obj["kind"]))
        if kind is not None and kind.watched:  # a gang's PodGroup is not: it is created with each attempt's workers
            self.written.remember(kind.field, created)

    def patch(self, obj: dict[str, Any]) -> None:
        patched = self.kube.patch(obj)
        kind = BY_KIND.get((obj["apiVersion"], obj["kind"]))
        if kind is not None and kind.watched:  # the next pass sees the patched fields
            self.written.remember(kind.field, patched)

    def status(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if new and status_changed(old, new):
            meta = self.body["metadata"]
            patch = {**new, "observedGeneration": meta.get("generation")}
            self.written.remember(TRAININGS, self.kube.patch_status(meta["namespace"], meta["name"], patch))
            record_transition(old.get("phase"), new.get("phase"))

    def event(self, reason: str, message: str, event_type: str = "Normal") -> None:
        self.kube.event(self.body, event_type, reason, message)


def _apply(writer: Writer, status: dict[str, Any], plan: Plan, job: Job) -> None:
    """Children first, in waves of writes that do not depend on each other (a gang's PodGroup, then deletions, then
    worker pods with the config children, then the launcher), then the status, then events. A plan that deletes or
    starts a new attempt records its status first, so a crash between steps never forgets a restart already
    decided."""
    first = plan.status.get("attempt", status.get("attempt", 0)) != status.get("attempt", 0) or any(
        isinstance(action, (Delete, DeleteTraining)) for action in plan.actions)
    if first:
        writer.status(status, plan.status)
    for wave in waves(plan.actions):
        writer.together([_call(writer, action, job) for action in wave])
    if not first:
        writer.status(status, plan.status)
    for event in plan.events:
        writer.event(event.reason, event.message, event.type)


def waves(actions: list[Action]) -> list[list[Action]]:
    """Actions grouped in the order they may run: a gang's pods need their PodGroup (and none is made if the
    cluster does not serve that kind), a failed attempt's launcher log is copied before its pods go, the old
    attempt's pods go before the new attempt's come, the launcher needs its workers. Everything else goes with the
    pods: a pod may be created before the ConfigMap and Secret it mounts (the kubelet waits for them)."""
    def rank(action: Action) -> int:
        if isinstance(action, DeleteTraining):
            return 4
        if isinstance(action, Delete):
            return 1
        if isinstance(action, SaveLog) or isinstance(action, Create) and action.obj["kind"] == "PodGroup":
            return 0
        if isinstance(action, Create) and action.obj["kind"] == "Job":
            return 3
        return 2  # pods, and config children: create or patch
    ranks = sorted({rank(action) for action in actions})
    return [[action for action in actions if rank(action) == r] for r in ranks]


def _call(writer: Writer, action: Action, job: Job) -> Callable[[], None]:
    meta, kube = writer.body["metadata"], writer.kube
    if isinstance(action, Create):
        return lambda: writer.create(action.obj, job.uid)
    if isinstance(action, CreateSshSecret):
        return lambda: writer.create(build_ssh_secret(job, generate_job_keys(meta['name'])), job.uid)
    if isinstance(action, Patch):
        return lambda: writer.patch(action.obj)
    if isinstance(action, Delete):
        return lambda: kube.delete(action.api_version, action.kind, meta["namespace"], action.name, action.uid)
    if isinstance(action, SaveLog):
        return lambda: log_copy.save(kube, writer.body, job, action)
    if isinstance(action, ReleaseGang):
        return lambda: kube.patch_existing(release_patch(job, action.since))
    return lambda: kube.delete_training(meta["namespace"], meta["name"])


def _fail(writer: Writer, status: dict[str, Any], reason: str, message: str, now: datetime) -> None:
    """A spec the operator cannot run: Failed, naming the field or the refusal and the fix; never retried until the
    spec changes."""
    meta = writer.body["metadata"]
    new = phase.spec_failed(status, meta.get("generation"), reason, message, now)
    if new is None:
        return
    writer.status(status, new)
    writer.event(reason, message, "Warning")
    log.warning("%s/%s: %s", meta["namespace"], meta["name"], message)


def _wait(writer: Writer, status: dict[str, Any], planned: dict[str, Any], refusal: Refusal, now: datetime) -> None:
    """The planned status with the refusal in it: one status write and one event per new refusal message, not per
    retry."""
    new = {**planned, **phase.waiting({**status, **planned}, refusal.reason, refusal.message, now)}
    if status_changed(status, new):
        writer.status(status, new)
        writer.event(refusal.reason, refusal.message, "Warning")
