"""Decide, without I/O, what to do with one DistributedTraining given its children: the level-triggered core.

`decide(job, status, children, now)` returns a Plan: objects to create, patch or delete, the new status, events,
and when to look again. Running it twice on the same world yields the same plan; the executor (kubetrain.sync)
applies it, so the operator converges from any state, including after a restart mid-way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kubetrain import reasons as r
from kubetrain.api import Job
from kubetrain.contract import (
    LABEL_ATTEMPT,
    LABEL_INDEX,
    LABEL_ROLE,
    ROLE_LAUNCHER,
    ROLE_WORKER,
    launcher_name,
    ssh_secret_name,
    worker_name,
)
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.rbac import build_role, build_role_binding, build_service_account
from kubetrain.manifests.service import build_service
from kubetrain.pod_state import (
    Failure,
    headline_metric,
    is_ready,
    is_terminating,
    iso,
    job_finished,
    merge_conditions,
    pod_failure,
    pod_phase,
    unschedulable_message,
)

Obj = Mapping[str, Any]
SAFETY_REQUEUE_SECONDS = 60.0
WAIT_REQUEUE_SECONDS = 2.0


@dataclass(frozen=True)
class Create:
    obj: dict[str, Any]


@dataclass(frozen=True)
class CreateSshSecret:
    """Create the job's Secret with a freshly generated key pair (the only non-deterministic child)."""


@dataclass(frozen=True)
class Patch:
    """Bring an existing child back to the desired fields (drift correction)."""

    obj: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    api_version: str
    kind: str
    name: str


@dataclass(frozen=True)
class DeleteTraining:
    """ttlSecondsAfterFinished elapsed: delete the DistributedTraining itself (children follow by ownership)."""


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


Action = Create | CreateSshSecret | Patch | Delete | DeleteTraining


@dataclass
class Children:
    """Everything the job owns, as plain dicts, grouped by kind."""

    pods: list[Obj] = field(default_factory=list)
    jobs: list[Obj] = field(default_factory=list)
    services: list[Obj] = field(default_factory=list)
    configmaps: list[Obj] = field(default_factory=list)
    secrets: list[Obj] = field(default_factory=list)
    serviceaccounts: list[Obj] = field(default_factory=list)
    roles: list[Obj] = field(default_factory=list)
    rolebindings: list[Obj] = field(default_factory=list)

    def named(self, kind_list: list[Obj], name: str) -> Obj | None:
        return next((o for o in kind_list if o["metadata"]["name"] == name), None)


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None


def attempt_of(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("labels", {}).get(LABEL_ATTEMPT, "-1"))
    except ValueError:
        return -1


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=None)


def decide(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> Plan:
    """The whole reconcile decision for one job."""
    phase = status.get("phase")
    if phase in r.TERMINAL_PHASES:
        return _finished(job, status, children, now)
    if job.spec.run_policy.suspend:
        return _suspended(job, status, children, now)
    started = parse_time(status.get("startTime")) or now
    deadline = job.spec.run_policy.active_deadline_seconds
    if deadline is not None and now >= started + timedelta(seconds=deadline):
        overdue = Failure(r.DEADLINE_EXCEEDED, f"the job ran longer than activeDeadlineSeconds={deadline}")
        return _fail(job, status, children, now, overdue)
    attempt = int(status.get("attempt", 0))
    failure = _current_failure(job, children, attempt)
    if failure is not None:
        restarts = int(status.get("restarts", 0))
        if restarts < job.spec.run_policy.backoff_limit:
            return _restart(job, status, children, now, failure)
        exhausted = Failure(
            failure.reason,
            f"{failure.message} (backoffLimit {job.spec.run_policy.backoff_limit} reached after {restarts} restarts)",
        )
        return _fail(job, status, children, now, exhausted)
    launcher = _current_launcher(children, attempt)
    if job_finished(launcher) == "Complete":
        return _succeed(job, status, children, now)
    return _run(job, status, children, now, attempt, started, deadline)


def _run(
    job: Job,
    status: Mapping[str, Any],
    children: Children,
    now: datetime,
    attempt: int,
    started: datetime,
    deadline: int | None,
) -> Plan:
    plan = Plan()
    plan.actions.extend(_config_actions(job, children))
    workers = _workers(children, attempt)
    waiting = False
    for pod in children.pods:
        if _role(pod) == ROLE_WORKER and pod not in workers.values() and not is_terminating(pod):
            plan.actions.append(Delete("v1", "Pod", pod["metadata"]["name"]))
            waiting = True
    for index in range(job.spec.workers):
        if index in workers:
            continue
        if children.named(children.pods, worker_name(job.name, index)) is not None:
            waiting = True  # an old attempt's pod with this name is still going away
            continue
        plan.actions.append(Create(build_worker_pod(job, index, attempt)))
    launcher = children.named(children.jobs, launcher_name(job.name))
    if launcher is not None and attempt_of(launcher) != attempt:
        if not is_terminating(launcher):
            plan.actions.append(Delete("batch/v1", "Job", launcher_name(job.name)))
        waiting = True
        launcher = None
    ready = sum(1 for pod in workers.values() if is_ready(pod))
    all_ready = ready == job.spec.workers
    if launcher is None and all_ready and not waiting:
        plan.actions.append(Create(build_launcher_job(job, attempt)))
    launcher_pod = _launcher_pod(children, attempt)
    launcher_running = launcher_pod is not None and pod_phase(launcher_pod) == "Running"
    unschedulable = next((m for m in map(unschedulable_message, workers.values()) if m), None)

    restarts = int(status.get("restarts", 0))
    if launcher_running:
        phase, reason, message = r.RUNNING, r.LAUNCHER_RUNNING, "the launcher is running mpirun on every worker"
    elif restarts and status.get("phase") == r.RESTARTING:
        phase = r.RESTARTING
        reason = str(status.get("reason", r.WORKER_FAILED))
        message = str(status.get("message", "restarting every worker and the launcher"))
    elif all_ready:
        phase, reason, message = r.STARTING, r.WORKERS_READY, "every worker accepts ssh; starting the launcher"
    else:
        phase, reason = r.PENDING, r.WAITING_FOR_WORKERS
        message = f"{ready}/{job.spec.workers} workers ready"
    if unschedulable and not launcher_running:
        reason, message = r.UNSCHEDULABLE, f"worker pods cannot be scheduled: {unschedulable}"
    # Until the children the API server refused exist, the job keeps saying why it waits (kubetrain.sync wrote it).
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
        r.COND_SCHEDULED: ("False", r.UNSCHEDULABLE, unschedulable)
        if unschedulable
        else ("True", "Scheduled", "every worker pod is placed on a node"),
        r.COND_RUNNING: ("True", r.LAUNCHER_RUNNING, message) if launcher_running else ("False", reason, message),
        r.COND_SUSPENDED: ("False", r.RESUMED, "the job is not suspended"),
    }
    if phase != r.RESTARTING and status.get("phase") == r.RESTARTING:
        conditions[r.COND_RESTARTING] = ("False", r.RESUMED, "every worker is back")
    plan.status = _status(job, status, now, phase, reason, message, conditions, ready, attempt)
    plan.status["startTime"] = iso(started)
    _transition_events(plan, status, phase, reason, message, unschedulable)
    if deadline is not None:
        remaining = (started + timedelta(seconds=deadline) - now).total_seconds()
        plan.requeue_after = max(remaining, 0.5)
    if waiting:
        plan.requeue_after = min(plan.requeue_after or WAIT_REQUEUE_SECONDS, WAIT_REQUEUE_SECONDS)
    plan.requeue_after = min(plan.requeue_after or SAFETY_REQUEUE_SECONDS, SAFETY_REQUEUE_SECONDS)
    return plan


def _config_actions(job: Job, children: Children) -> list[Action]:
    """ServiceAccount, Role, RoleBinding, Secret, ConfigMap and Service: create when missing, correct drift."""
    actions: list[Action] = []
    desired = [
        (children.serviceaccounts, build_service_account(job), None),
        (children.roles, build_role(job), "rules"),
        (children.rolebindings, build_role_binding(job), "subjects"),
        (children.configmaps, build_hosts_configmap(job), "data"),
        (children.services, build_service(job), "spec"),
    ]
    for existing_list, obj, drift_key in desired:
        existing = children.named(existing_list, obj["metadata"]["name"])
        if existing is None:
            actions.append(Create(obj))
        elif drift_key and _drifted(existing.get(drift_key), obj[drift_key]):
            actions.append(Patch(obj))
    if children.named(children.secrets, ssh_secret_name(job.name)) is None:
        actions.append(CreateSshSecret())
    return actions


def _drifted(actual: Any, desired: Any) -> bool:
    """True when a field we set differs; fields the API server adds (clusterIP, ...) are not drift."""
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return True
        return any(_drifted(actual.get(key), value) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return True
        return any(_drifted(a, d) for a, d in zip(actual, desired, strict=True))
    return bool(actual != desired)


def _restart(job: Job, status: Mapping[str, Any], children: Children, now: datetime, failure: Failure) -> Plan:
    """Tear the whole attempt down; the next syncs bring up attempt+1 (resuming from the latest checkpoint)."""
    restarts = int(status.get("restarts", 0)) + 1
    attempt = int(status.get("attempt", 0)) + 1
    plan = Plan(actions=_delete_attempt(job, children), requeue_after=WAIT_REQUEUE_SECONDS)
    message = f"restart {restarts}/{job.spec.run_policy.backoff_limit}: {failure.message}"
    conditions = {
        r.COND_RESTARTING: ("True", failure.reason, message),
        r.COND_RUNNING: ("False", failure.reason, message),
        r.COND_WORKERS_READY: ("False", failure.reason, "restarting every worker"),
    }
    plan.status = _status(job, status, now, r.RESTARTING, failure.reason, message, conditions, 0, attempt)
    plan.status["restarts"] = restarts
    plan.events.append(Event("Warning", failure.reason, message))
    return plan


def _fail(job: Job, status: Mapping[str, Any], children: Children, now: datetime, failure: Failure) -> Plan:
    attempt = int(status.get("attempt", 0))
    plan = Plan()
    launcher = children.named(children.jobs, launcher_name(job.name))
    if launcher is not None and job_finished(launcher) is None and not is_terminating(launcher):
        plan.actions.append(Delete("batch/v1", "Job", launcher_name(job.name)))  # stop the training
    conditions = {
        r.COND_FAILED: ("True", failure.reason, failure.message),
        r.COND_RUNNING: ("False", failure.reason, failure.message),
        r.COND_RESTARTING: ("False", failure.reason, "no more restarts"),
    }
    plan.status = _status(job, status, now, r.FAILED, failure.reason, failure.message, conditions, 0, attempt)
    plan.status["completionTime"] = iso(now)
    plan.events.append(Event("Warning", failure.reason, failure.message))
    finished = _finished(job, plan.status, children, now)
    plan.actions.extend(a for a in finished.actions if a not in plan.actions)
    plan.requeue_after = finished.requeue_after
    return plan


def _succeed(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> Plan:
    attempt = int(status.get("attempt", 0))
    message = "the launcher exited 0: training finished"
    conditions = {
        r.COND_SUCCEEDED: ("True", r.LAUNCHER_SUCCEEDED, message),
        r.COND_RUNNING: ("False", r.LAUNCHER_SUCCEEDED, message),
    }
    plan = Plan()
    plan.status = _status(job, status, now, r.SUCCEEDED, r.LAUNCHER_SUCCEEDED, message, conditions, 0, attempt)
    plan.status["completionTime"] = iso(now)
    plan.events.append(Event("Normal", r.LAUNCHER_SUCCEEDED, message))
    finished = _finished(job, plan.status, children, now)
    plan.actions = finished.actions
    plan.requeue_after = finished.requeue_after
    return plan


def _finished(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> Plan:
    """Terminal: apply cleanPodPolicy (idempotently) and the TTL."""
    plan = Plan()
    policy = job.spec.run_policy.clean_pod_policy
    for pod in children.pods:
        if is_terminating(pod) or policy == "None":
            continue
        if policy == "All" or pod_phase(pod) in ("Pending", "Running"):
            plan.actions.append(Delete("v1", "Pod", pod["metadata"]["name"]))
    ttl = job.spec.run_policy.ttl_seconds_after_finished
    completed = parse_time(status.get("completionTime")) or now
    if ttl is not None:
        remaining = (completed + timedelta(seconds=ttl) - now).total_seconds()
        if remaining <= 0:
            plan.actions.append(DeleteTraining())
            plan.events.append(Event("Normal", r.TTL_EXPIRED, f"ttlSecondsAfterFinished={ttl} elapsed"))
        else:
            plan.requeue_after = remaining
    if plan.actions and plan.requeue_after is None:
        plan.requeue_after = WAIT_REQUEUE_SECONDS
    return plan


def _suspended(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> Plan:
    attempt = int(status.get("attempt", 0))
    plan = Plan(actions=_delete_attempt(job, children))
    message = "spec.runPolicy.suspend is true: pods deleted, checkpoints and configuration kept"
    conditions = {
        r.COND_SUSPENDED: ("True", r.SUSPENDED_BY_USER, message),
        r.COND_RUNNING: ("False", r.SUSPENDED_BY_USER, message),
        r.COND_WORKERS_READY: ("False", r.SUSPENDED_BY_USER, "0 workers while suspended"),
    }
    plan.status = _status(job, status, now, r.SUSPENDED, r.SUSPENDED_BY_USER, message, conditions, 0, attempt)
    plan.status["startTime"] = None  # activeDeadlineSeconds counts again from the resume
    if status.get("phase") != r.SUSPENDED:
        plan.events.append(Event("Normal", r.SUSPENDED_BY_USER, message))
    if plan.actions:
        plan.requeue_after = WAIT_REQUEUE_SECONDS
    return plan


def _delete_attempt(job: Job, children: Children) -> list[Action]:
    actions: list[Action] = [
        Delete("v1", "Pod", pod["metadata"]["name"])
        for pod in children.pods
        if _role(pod) == ROLE_WORKER and not is_terminating(pod)
    ]
    launcher = children.named(children.jobs, launcher_name(job.name))
    if launcher is not None and not is_terminating(launcher):
        actions.append(Delete("batch/v1", "Job", launcher_name(job.name)))
    return actions


def _current_failure(job: Job, children: Children, attempt: int) -> Failure | None:
    """The first reason the current attempt cannot succeed, or None."""
    workers = _workers(children, attempt, include_terminating=True)
    for index in sorted(workers):
        failure = pod_failure(workers[index], ROLE_WORKER)
        if failure is not None:
            return failure
    launcher_pod = _launcher_pod(children, attempt)
    if launcher_pod is not None:
        failure = pod_failure(launcher_pod, ROLE_LAUNCHER)
        if failure is not None:
            return failure
    launcher = _current_launcher(children, attempt)
    if job_finished(launcher) == "Failed":
        return Failure(r.LAUNCHER_FAILED, f"launcher Job {launcher_name(job.name)} failed")
    if launcher is not None:
        for index in range(job.spec.workers):
            pod = workers.get(index)
            if pod is None or is_terminating(pod):
                return Failure(r.WORKER_LOST, f"worker pod {worker_name(job.name, index)} disappeared during training")
    return None


def _workers(children: Children, attempt: int, include_terminating: bool = False) -> dict[int, Obj]:
    found: dict[int, Obj] = {}
    for pod in children.pods:
        if _role(pod) != ROLE_WORKER or attempt_of(pod) != attempt:
            continue
        if is_terminating(pod) and not include_terminating:
            continue
        found[int(pod["metadata"]["labels"].get(LABEL_INDEX, "0"))] = pod
    return found


def _current_launcher(children: Children, attempt: int) -> Obj | None:
    launcher = next((j for j in children.jobs if _role(j) == ROLE_LAUNCHER), None)
    return launcher if launcher is not None and attempt_of(launcher) == attempt else None


def _launcher_pod(children: Children, attempt: int) -> Obj | None:
    pods = [p for p in children.pods if _role(p) == ROLE_LAUNCHER and attempt_of(p) == attempt]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return pods[-1] if pods else None


def _role(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("labels", {}).get(LABEL_ROLE, ""))


def _status(
    job: Job,
    status: Mapping[str, Any],
    now: datetime,
    phase: str,
    reason: str,
    message: str,
    conditions: Mapping[str, tuple[str, str, str]],
    ready: int,
    attempt: int,
) -> dict[str, Any]:
    """The operator's part of status (rank 0 owns progress.epoch/step/metrics and checkpoint)."""
    total = job.spec.workers
    new: dict[str, Any] = {
        "phase": phase,
        "reason": reason,
        "message": message,
        "attempt": attempt,
        "restarts": int(status.get("restarts", 0)),
        "workers": {"ready": ready, "total": total, "summary": f"{ready}/{total}"},
        "conditions": merge_conditions(status.get("conditions") or [], conditions, now),
    }
    progress = status.get("progress") or {}
    if progress.get("epoch") is not None:
        epochs = progress.get("epochs")
        new["progress"] = {"summary": f"{progress['epoch']}/{epochs}" if epochs else str(progress["epoch"])}
    metric = headline_metric(progress.get("metrics"))
    if metric:
        new["metric"] = metric
    return new


def _transition_events(
    plan: Plan, status: Mapping[str, Any], phase: str, reason: str, message: str, unschedulable: str | None
) -> None:
    if status.get("phase") != phase:
        plan.events.append(Event("Normal", reason if phase != r.RESTARTING else r.RESTARTING, f"{phase}: {message}"))
    was_unschedulable = status.get("reason") == r.UNSCHEDULABLE
    if unschedulable and not was_unschedulable:
        plan.events.append(Event("Warning", r.UNSCHEDULABLE, unschedulable))


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing `new` (a partial status) would change anything."""
    return _drifted(old, {k: v for k, v in new.items() if v is not None}) or any(
        v is None and old.get(k) is not None for k, v in new.items()
    )
