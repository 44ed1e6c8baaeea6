"""Phase, conditions, reason and message, and the events that announce them: what the user reads in the status.

Includes what kubetrain.sync reports when a pass cannot apply its plan (InvalidSpec, an API server refusal, a
ChildConflict), so every status the operator writes is decided here."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubetrain import reasons as r
from kubetrain.api import Job
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_LAUNCHER, ROLE_WORKER, launcher_name, worker_name
from kubetrain.failure_policy import Cause
from kubetrain.failure_report import placement
from kubetrain.kueue import cluster_queue, gated, waiting_words
from kubetrain.plan import elastic, startup
from kubetrain.plan.desired import drifted
from kubetrain.plan.model import EVENT_MESSAGE_CHARS, Create, CreateSshSecret, Event, Obj, Plan
from kubetrain.plan.world import World
from kubetrain.pod_state import (
    Failure,
    headline_metric,
    is_terminating,
    iso,
    job_finished,
    kueue_stop,
    merge_conditions,
    pod_failure,
    pod_phase,
    unschedulable_message,
)

Conditions = Mapping[str, tuple[str, str, str]]


def current_failure(world: World) -> Failure | None:
    """The first reason the current attempt cannot succeed, or None."""
    job = world.job
    replaced = elastic.departing(world) if job.spec.elastic else {}  # an elastic job replaces these, goes on
    where = placement(job, world.workers, world.launcher_pod)
    for index in sorted(world.workers):
        failure = pod_failure(world.workers[index], ROLE_WORKER, where)
        if failure is not None and index not in replaced and index < job.spec.workers:
            return failure
    if world.launcher_pod is not None:
        failure = pod_failure(world.launcher_pod, ROLE_LAUNCHER, where)
        if failure is not None:
            return failure
    if job_finished(world.launcher) == "Failed":
        return Failure(r.LAUNCHER_FAILED, f"launcher Job {launcher_name(job.name)} failed", Cause("Launcher"))
    if world.launcher is not None and job.spec.elastic is None:
        for index in range(job.spec.workers):
            pod = world.workers.get(index)
            gone = world.departed.get(index) if pod is None else None
            failure = pod_failure(gone, ROLE_WORKER, where) if gone is not None else None
            if failure is not None:  # deleted right after Kubernetes marked it: say why, as if seen marked
                return failure
            if pod is None or is_terminating(pod):
                return Failure(r.WORKER_LOST, f"worker pod {worker_name(job.name, index)} disappeared during training",
                               Cause("Worker"))
    return None


def kueue_eviction(world: World) -> Failure | None:
    """Kueue stopped a worker of the current attempt (its Workload was evicted), or None."""
    pods = [*world.workers.values(), *world.departed.values()]
    return next((stop for stop in (kueue_stop(pod, ROLE_WORKER) for pod in pods) if stop), None)


def admission(world: World) -> tuple[str, str, str] | None:
    """The Admitted condition of a job in a Kueue queue: False while any worker is gated, naming the LocalQueue and
    what Kueue says is missing; None without a queue or workers."""
    queue, workers = world.job.queue, world.live_workers
    if queue is None or not workers:
        return None
    waiting = sum(1 for pod in workers.values() if gated(pod))
    if waiting:
        return ("False", r.WAITING_FOR_QUOTA, f"Kueue has not admitted the workers ({waiting}/{world.job.spec.workers} "
                                              f"gated) from LocalQueue {queue.name}: {waiting_words(world.workload)}")
    where = cluster_queue(world.workload)
    return ("True", r.ADMITTED, f"Kueue admitted the workers from LocalQueue {queue.name}"
                                + (f" in ClusterQueue {where}" if where else ""))


LAUNCHER_STARTED = ("Running", "Succeeded")  # a Failed launcher pod is a failure (current_failure)


def running(world: World, plan: Plan) -> None:
    """Pending, Starting, Running (or still Restarting) from the workers and the launcher; into `plan`."""
    job, status = world.job, world.status
    workers = world.live_workers
    ready = world.ready_count
    all_ready = ready == job.spec.workers
    enough = ready >= job.spec.workers_to_start
    # A launcher pod that has succeeded still means Running until its Job says so too (the Job's status follows the
    # pod's), so the phase never steps back to Starting at the end of a training.
    launcher_running = world.launcher_pod is not None and pod_phase(world.launcher_pod) in LAUNCHER_STARTED
    unschedulable = next((m for m in map(unschedulable_message, workers.values()) if m), None)
    admitted = admission(world)
    if launcher_running and job.spec.elastic:
        phase, reason = r.RUNNING, r.LAUNCHER_RUNNING
        message = f"the launcher is running horovodrun (elastic) with {ready}/{job.spec.workers} workers Ready"
    elif launcher_running:
        phase, reason, message = r.RUNNING, r.LAUNCHER_RUNNING, "the launcher is running mpirun on every worker"
    elif admitted is not None and admitted[0] == "False":
        phase, reason, message = r.PENDING, admitted[1], admitted[2]
    elif world.attempt and status.get("phase") == r.RESTARTING:
        phase = r.RESTARTING
        reason = str(status.get("reason", r.WORKER_FAILED))
        message = str(status.get("message", "restarting every worker and the launcher"))
    elif all_ready or (enough and job.spec.elastic):
        phase, reason = r.STARTING, r.WORKERS_READY
        message = f"{ready}/{job.spec.workers} workers accept ssh; starting the launcher"
        if all_ready:
            message = "every worker accepts ssh; starting the launcher"
    else:
        phase, reason = r.PENDING, r.WAITING_FOR_WORKERS
        message = f"{ready}/{job.spec.workers} workers ready"
    gang = job.spec.scheduling.gang
    if unschedulable and not launcher_running:
        reason, message = r.UNSCHEDULABLE, f"worker pods cannot be scheduled: {unschedulable}"
        if gang is not None:
            reason, message = r.GANG_UNSCHEDULABLE, gang_message(world, unschedulable)
    # Until the children the API server refused exist, the job keeps saying why it waits (see `waiting`).
    creating = any(isinstance(action, (Create, CreateSshSecret)) for action in plan.actions)
    refused = creating and status.get("reason") in r.WAITING_REFUSALS
    if refused:
        reason, message = str(status["reason"]), str(status.get("message", ""))
    conditions = {
        r.COND_CREATED: ("False", reason, message)
        if refused
        else ("True", r.CHILDREN_CREATED, "Secret, ConfigMap, Service, RBAC and worker pods created"),
        r.COND_WORKERS_READY: (
            "True" if all_ready else "False",
            r.WORKERS_READY if all_ready else r.WAITING_FOR_WORKERS,
            f"{ready}/{job.spec.workers} workers ready",
        ),
        r.COND_SCHEDULED: ("False", r.GANG_UNSCHEDULABLE if gang else r.UNSCHEDULABLE, unschedulable)
        if unschedulable
        else ("True", "Scheduled", "every worker pod is placed on a node"),
        r.COND_RUNNING: ("True", r.LAUNCHER_RUNNING, message) if launcher_running else ("False", reason, message),
        r.COND_SUSPENDED: ("False", r.RESUMED, "the job is not suspended"),
    }
    if phase != r.RESTARTING and status.get("phase") == r.RESTARTING:
        conditions[r.COND_RESTARTING] = ("False", r.RESUMED, "every worker is back")
    if admitted is not None:
        conditions[r.COND_ADMITTED] = admitted
    restored = restored_condition(world)
    if restored is not None:
        conditions[r.COND_CHECKPOINT_RESTORED] = restored
        if restored[2] != _condition(status, r.COND_CHECKPOINT_RESTORED).get("message"):
            kind = "Normal" if restored[1] == r.RESUMED_FROM_CHECKPOINT else "Warning"
            plan.events.append(Event(kind, restored[1], restored[2]))
    members = elastic.Membership()
    if job.spec.elastic:
        conditions[r.COND_MIN_WORKERS_READY] = elastic.min_condition(world)
        members = elastic.membership(world, launcher_running)
        plan.events.extend(members.events)
    plan.status = status_of(world, phase, reason, message, conditions, ready)
    plan.status["workers"].update(members.workers)
    plan.status["startTime"] = iso(world.started)
    plan.status["startup"] = startup.timeline(world, plan.status["conditions"])
    if status.get("phase") != phase:
        plan.events.append(Event("Normal", reason if phase != r.RESTARTING else r.RESTARTING, f"{phase}: {message}"))
    if unschedulable and status.get("reason") not in (r.UNSCHEDULABLE, r.GANG_UNSCHEDULABLE):
        plan.events.append(Event("Warning", reason if gang else r.UNSCHEDULABLE, message if gang else unschedulable))


def restored_condition(world: World) -> tuple[str, str, str] | None:
    """CheckpointRestored from what rank 0 reported it resumed from (status.checkpoint.resumedFrom): which
    checkpoint, written when and by which job. Only said, never acted on. None until rank 0 reports a resume."""
    resumed = (world.status.get("checkpoint") or {}).get("resumedFrom")
    if not isinstance(resumed, Mapping):
        return None
    writer = str(resumed.get("jobUID") or "")
    message = (f"resumed from epoch {resumed.get('epoch')} of checkpoint {resumed.get('path')} written at "
               f"{resumed.get('writtenAt') or 'an unknown time'} by job uid {writer or '(none recorded)'}")
    if writer == world.job.uid:
        return "True", r.RESUMED_FROM_CHECKPOINT, f"{message} (this job)"
    return "True", r.RESUMED_FROM_ANOTHER_JOB, (f"{message}, not this job (uid {world.job.uid}): a job of the same "
                                                "name wrote it; spec.checkpoint.resume: SameJob starts fresh instead")


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def unplaced_workers(world: World) -> list[Obj]:
    """The current attempt's live worker pods no node has been chosen for yet."""
    return [pod for pod in world.live_workers.values() if not (pod.get("spec") or {}).get("nodeName")]


def gang_message(world: World, scheduler_says: str) -> str:
    """Why a gang waits: how many workers are unplaced, what they need together, and the scheduler's words."""
    job = world.job
    gang = job.spec.scheduling.gang
    assert gang is not None
    gpus = job.spec.resources.gpus_per_worker * gang.min_available
    need = f" ({gpus} GPUs together)" if gpus else ""
    return (f"{len(unplaced_workers(world))}/{job.spec.workers} workers unplaced; {gang.scheduler} places at least "
            f"{gang.min_available}{need} at once or none: {scheduler_says}")


def restarting(world: World, failure: Failure, plan: Plan, ignored_by: str | None = None) -> None:
    """Restarting after `failure`, counted toward backoffLimit unless a podFailurePolicy rule (`ignored_by`) says
    Ignore; ignored restarts are counted apart, in status.ignoredFailures."""
    restarts = world.restarts + (0 if ignored_by else 1)
    if ignored_by:
        message = f"restart, not counted toward backoffLimit ({ignored_by}): {failure.message}"
    else:
        message = f"restart {restarts}/{world.job.spec.run_policy.backoff_limit}: {failure.message}"
    _next_attempt(world, failure.reason, message, plan, failure=failure)
    plan.status["restarts"] = restarts
    if ignored_by:
        plan.status["ignoredFailures"] = int(world.status.get("ignoredFailures", 0)) + 1


def requeued(world: World, stop: Failure, plan: Plan) -> None:
    """Kueue evicted the attempt: a new one waits for admission again; not a failure, so nothing is counted."""
    message = f"{stop.message}; not counted toward backoffLimit: the next attempt waits for Kueue to admit it"
    _next_attempt(world, stop.reason, message, plan, {r.COND_ADMITTED: ("False", stop.reason, stop.message)})


def _next_attempt(world: World, reason: str, message: str, plan: Plan, conditions: Conditions | None = None,
                  failure: Failure | None = None) -> None:
    """Restarting into attempt+1: the status, its conditions (and `conditions`), and a Warning event; what
    `failure` names (status.failure) goes in the status and the event."""
    merged = {
        r.COND_RESTARTING: ("True", reason, message),
        r.COND_RUNNING: ("False", reason, message),
        r.COND_WORKERS_READY: ("False", reason, "restarting every worker"),
        **(conditions or {}),
    }
    plan.status = status_of(world, r.RESTARTING, reason, message, merged, 0, world.attempt + 1)
    plan.status["startup"] = startup.restarting(world.attempt + 1, world.now)
    plan.events.append(Event("Warning", reason, reported(world, failure, message, plan)))


def reported(world: World, failure: Failure | None, message: str, plan: Plan) -> str:
    """Puts what `failure` names in status.failure; returns the event's message: `message`, then the failing rank's
    last lines (bounded), shown as what it printed."""
    if failure is None or failure.detail is None:
        return message
    plan.status["failure"] = failure.detail.status(world.attempt)
    return failure.detail.event_message(message, EVENT_MESSAGE_CHARS)


def failed(world: World, failure: Failure, plan: Plan) -> None:
    conditions = {
        r.COND_FAILED: ("True", failure.reason, failure.message),
        r.COND_RUNNING: ("False", failure.reason, failure.message),
        r.COND_RESTARTING: ("False", failure.reason, "no more restarts"),
    }
    plan.status = status_of(world, r.FAILED, failure.reason, failure.message, conditions, 0)
    plan.status["completionTime"] = iso(world.now)
    _end_startup(world, plan)
    plan.events.append(Event("Warning", failure.reason, reported(world, failure, failure.message, plan)))


def succeeded(world: World, plan: Plan) -> None:
    message = "the launcher exited 0: training finished"
    conditions = {
        r.COND_SUCCEEDED: ("True", r.LAUNCHER_SUCCEEDED, message),
        r.COND_RUNNING: ("False", r.LAUNCHER_SUCCEEDED, message),
    }
    plan.status = status_of(world, r.SUCCEEDED, r.LAUNCHER_SUCCEEDED, message, conditions, 0)
    plan.status["completionTime"] = iso(world.now)
    _end_startup(world, plan)
    plan.events.append(Event("Normal", r.LAUNCHER_SUCCEEDED, message))


def _end_startup(world: World, plan: Plan) -> None:
    """A finished job's timeline stays as it was, waiting for nothing."""
    ended = startup.ended(world.status)
    if ended is not None:
        plan.status["startup"] = ended


def suspended(world: World, plan: Plan) -> None:
    message = "spec.runPolicy.suspend is true: pods deleted, checkpoints and configuration kept"
    conditions = {
        r.COND_SUSPENDED: ("True", r.SUSPENDED_BY_USER, message),
        r.COND_RUNNING: ("False", r.SUSPENDED_BY_USER, message),
        r.COND_WORKERS_READY: ("False", r.SUSPENDED_BY_USER, "0 workers while suspended"),
    }
    plan.status = status_of(world, r.SUSPENDED, r.SUSPENDED_BY_USER, message, conditions, 0)
    plan.status["startTime"] = None  # activeDeadlineSeconds counts again from the resume
    if world.status.get("phase") != r.SUSPENDED:
        plan.events.append(Event("Normal", r.SUSPENDED_BY_USER, message))


def suspended_since(status: Mapping[str, Any]) -> str | None:
    """When the job was last suspended (its Suspended condition turned True), or None while it is not."""
    condition = _condition(status, r.COND_SUSPENDED)
    return condition.get("lastTransitionTime") if condition.get("status") == "True" else None


def status_of(world: World, phase: str, reason: str, message: str, conditions: Conditions, ready: int,
              attempt: int | None = None) -> dict[str, Any]:
    """The operator's part of status (rank 0 owns progress.epoch/step/metrics and checkpoint)."""
    status = world.status
    new: dict[str, Any] = {
        "phase": phase,
        "reason": reason,
        "message": message,
        "attempt": world.attempt if attempt is None else attempt,
        "restarts": world.restarts,
        "workers": workers_status(world.job, ready),
        "conditions": merge_conditions(status.get("conditions") or [], conditions, world.now),
        # A new attempt has no pods yet: the old attempt's may no longer report.
        "podUIDs": world.reporter_uids if attempt is None else [],
    }
    progress = status.get("progress") or {}
    if progress.get("epoch") is not None:
        epochs = progress.get("epochs")
        new["progress"] = {"summary": f"{progress['epoch']}/{epochs}" if epochs else str(progress["epoch"])}
    metric = headline_metric(progress)
    if metric:
        new["metric"] = metric
    return new


def workers_status(job: Job, ready: int) -> dict[str, Any]:
    """status.workers: Ready and wanted worker pods, an elastic job's bounds, the scale subresource's selector."""
    total = job.spec.workers
    workers: dict[str, Any] = {"ready": ready, "total": total, "summary": f"{ready}/{total}",
                               "selector": f"{LABEL_JOB}={job.name},{LABEL_ROLE}={ROLE_WORKER}"}
    if job.spec.elastic:
        workers.update(min=job.spec.elastic.min_workers, max=job.spec.elastic.max_workers, members=[])
    return workers


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing `new` (a partial status) would change anything."""
    return drifted(old, {k: v for k, v in new.items() if v is not None}) or any(
        v is None and old.get(k) is not None for k, v in new.items()
    )


# What a pass reports when it cannot apply its plan (kubetrain.sync writes these).


def spec_failed(status: Mapping[str, Any], generation: int | None, reason: str, message: str,
                now: datetime) -> dict[str, Any] | None:
    """Failed for a spec the operator cannot run (InvalidSpec, AdmissionDenied), once per generation."""
    if status.get("reason") == reason and status.get("observedGeneration") == generation:
        return None
    return {
        "phase": r.FAILED,
        "reason": reason,
        "message": message,
        "conditions": merge_conditions(status.get("conditions") or [], {r.COND_FAILED: ("True", reason, message)}, now),
        "completionTime": iso(now),
    }


def waiting(status: Mapping[str, Any], reason: str, message: str, now: datetime) -> dict[str, Any]:
    """A refusal that may clear (quota, the operator's RBAC, a webhook down, a failed pass): the phase stays, the job
    says why, in the conditions the next pass's plan gives it too (a retry then rewrites nothing)."""
    updates = {r.COND_CREATED: ("False", reason, message)}
    running: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == r.COND_RUNNING), {})
    if running.get("status") != "True":
        updates[r.COND_RUNNING] = ("False", reason, message)
    return {
        "reason": reason,
        "message": message,
        "conditions": merge_conditions(status.get("conditions") or [], updates, now),
    }


def conflicted(status: Mapping[str, Any], message: str, now: datetime) -> dict[str, Any]:
    """A child's name is taken by an object the job does not own."""
    conditions = {r.COND_CREATED: ("False", r.CHILD_CONFLICT, message)}
    return {
        "reason": r.CHILD_CONFLICT,
        "message": message,
        "conditions": merge_conditions(status.get("conditions") or [], conditions, now),
    }
