"""One reconcile pass for one DistributedTraining: read the world, decide (kubetrain.plan), apply."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from kubetrain import reasons
from kubetrain.api import Job, SpecError, parse_job
from kubetrain.build.ssh import build_ssh_secret
from kubetrain.keys import generate_ssh_keypair
from kubetrain.kube import ChildConflict, ChildRejected, Kube
from kubetrain.metrics import record_transition
from kubetrain.plan import (
    Children,
    Create,
    CreateSshSecret,
    Delete,
    DeleteTraining,
    Patch,
    Plan,
    decide,
    status_changed,
)
from kubetrain.status import iso, merge_conditions

log = logging.getLogger(__name__)
CONFLICT_REQUEUE_SECONDS = 30.0


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def sync_training(kube: Kube, namespace: str, name: str) -> float | None:
    """Converge one job; returns seconds until it should be looked at again (None: only on the next event)."""
    body = kube.get_training(namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    status: dict[str, Any] = body.get("status") or {}
    now = utcnow()
    try:
        job = parse_job(body)
    except SpecError as error:
        _reject(kube, body, status, str(error), now)
        return None
    children = Children(**kube.list_children(namespace, name, job.uid))
    plan = decide(job, status, children, now)
    try:
        _apply(kube, body, status, plan, job)
    except ChildRejected as rejected:  # what the parser could not foresee: fail once, loudly, instead of retrying
        _reject(kube, body, status, str(rejected), now)
        return None
    except ChildConflict as conflict:
        _write_status(kube, body, status, _conflict_status(status, str(conflict), now))
        kube.event(body, "Warning", reasons.CHILD_CONFLICT, str(conflict))
        return CONFLICT_REQUEUE_SECONDS
    return plan.requeue_after


def _apply(kube: Kube, body: dict[str, Any], status: dict[str, Any], plan: Plan, job: Job) -> None:
    """Status first, so a crash between steps never forgets a restart already decided; then the actions."""
    meta = body["metadata"]
    _write_status(kube, body, status, plan.status)
    for event in plan.events:
        kube.event(body, event.type, event.reason, event.message)
    for action in plan.actions:
        if isinstance(action, Create):
            kube.create(action.obj, job.uid)
        elif isinstance(action, CreateSshSecret):
            kube.create(build_ssh_secret(job, generate_ssh_keypair(f"kubetrain-{meta['name']}")), job.uid)
        elif isinstance(action, Patch):
            kube.patch(action.obj)
        elif isinstance(action, Delete):
            kube.delete(action.api_version, action.kind, meta["namespace"], action.name)
        elif isinstance(action, DeleteTraining):
            kube.delete_training(meta["namespace"], meta["name"])
            return


def _write_status(kube: Kube, body: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    if new and status_changed(old, new):
        meta = body["metadata"]
        kube.patch_status(meta["namespace"], meta["name"], {**new, "observedGeneration": meta.get("generation")})
        record_transition(old.get("phase"), new.get("phase"))


def _reject(kube: Kube, body: dict[str, Any], status: dict[str, Any], error: str, now: datetime) -> None:
    """A spec the operator cannot run: Failed, naming the field and the fix; never retried until the spec changes."""
    generation = body["metadata"].get("generation")
    if status.get("reason") == reasons.INVALID_SPEC and status.get("observedGeneration") == generation:
        return
    message = f"invalid spec: {error}"
    new = {
        "phase": reasons.FAILED,
        "reason": reasons.INVALID_SPEC,
        "message": message,
        "conditions": merge_conditions(
            status.get("conditions") or [], {reasons.COND_FAILED: ("True", reasons.INVALID_SPEC, message)}, now
        ),
        "completionTime": iso(now),
    }
    _write_status(kube, body, status, new)
    kube.event(body, "Warning", reasons.INVALID_SPEC, message)
    log.warning("%s/%s: %s", body["metadata"]["namespace"], body["metadata"]["name"], message)


def _conflict_status(status: dict[str, Any], message: str, now: datetime) -> dict[str, Any]:
    conditions = {reasons.COND_CREATED: ("False", reasons.CHILD_CONFLICT, message)}
    return {
        "reason": reasons.CHILD_CONFLICT,
        "message": message,
        "conditions": merge_conditions(status.get("conditions") or [], conditions, now),
    }
