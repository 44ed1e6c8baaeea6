"""The current attempt's startup timeline (status.startup): when each phase from `kubectl apply` to the first training
step was reached, the seconds between them, and what the attempt waits for now.

The phases, in order: Created (the job, or for a later attempt its first worker pod), Admitted (Kueue; only with a
queue), Scheduled, ContainersStarted and WorkersReady (the workers the launcher needs), LauncherStarted, then WorldUp
and FirstStep, which rank 0 reports itself (status.progress.startup, trainlib.startup). Times from pods have
Kubernetes' one-second resolution; rank 0's have milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from kubetrain.contract import ROLE_LAUNCHER, ROLE_WORKER
from kubetrain.plan.model import Obj, read_time
from kubetrain.plan.world import World
from kubetrain.pod_state import is_ready, iso

CREATED, RESTARTED, ADMITTED, SCHEDULED = "Created", "Restarted", "Admitted", "Scheduled"
CONTAINERS_STARTED, WORKERS_READY, LAUNCHER_STARTED = "ContainersStarted", "WorkersReady", "LauncherStarted"
WORLD_UP, FIRST_STEP = "WorldUp", "FirstStep"
# What rank 0 reports in status.progress.startup (trainlib.startup writes these keys).
REPORTED = {WORLD_UP: "worldUpAt", FIRST_STEP: "firstStepAt"}
# Pods' times are whole seconds, rank 0's have milliseconds, and nodes' clocks differ a little: a reported time this
# much before the phase it follows still counts.
CLOCK_SLACK = timedelta(seconds=2)


def timeline(world: World, conditions: Sequence[Obj]) -> dict[str, Any]:
    """status.startup for the current attempt: the phases reached so far, in order (a phase counts only once every
    phase before it is reached), and what it waits for since the last one. A phase keeps the time it was first
    recorded with, so an elastic job's replaced workers do not move it. `conditions` are the status's conditions as
    this pass writes them (Admitted's transition time)."""
    steps = _reached(world, conditions)
    kept = _recorded(world)
    phases: list[dict[str, Any]] = []
    times: list[datetime] = []
    for name, found in steps:
        # not a time rank 0 reported before the phase it follows: that is another attempt's
        usable = [t for t in (kept.get(name), found)
                  if t is not None and not (name in REPORTED and times and t < times[-1] - CLOCK_SLACK)]
        if not usable:
            break
        at = usable[0]
        seconds = (at - times[-1]).total_seconds() if times else 0.0
        phases.append({"name": name, "at": _stamp(at), "seconds": round(max(0.0, seconds), 1)})
        times.append(at)
    pending = steps[len(phases)][0] if len(phases) < len(steps) else None
    return {
        "attempt": world.attempt,
        "phases": phases,
        "seconds": round((times[-1] - times[0]).total_seconds(), 1) if times else None,
        "waitingFor": _waiting_for(world, pending) if pending else None,
        "waitingSince": phases[-1]["at"] if pending and phases else None,
    }


def restarting(attempt: int, now: datetime) -> dict[str, Any]:
    """status.startup as a new attempt begins: nothing reached yet, the old attempt's pods going away."""
    return {"attempt": attempt, "phases": [], "seconds": None, "waitingFor": "the last attempt's pods to go away",
            "waitingSince": iso(now)}


def ended(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """status.startup once the job has finished: the phases as they were, and no longer waiting for anything."""
    startup = status.get("startup")
    if not isinstance(startup, Mapping) or startup.get("waitingFor") is None:
        return None
    return {**startup, "waitingFor": None, "waitingSince": None}


def _reached(world: World, conditions: Sequence[Obj]) -> list[tuple[str, datetime | None]]:
    """Each phase that applies to this job, with when it was reached (None: not yet)."""
    job = world.job
    workers = [pod for index, pod in world.live_workers.items() if index < job.spec.workers]
    needed = job.spec.workers_to_start
    if world.attempt == 0:
        steps: list[tuple[str, datetime | None]] = [(CREATED, read_time(job.created))]
    else:
        steps = [(RESTARTED, min((t for t in map(_created, workers) if t), default=None))]
    if job.queue is not None:
        steps.append((ADMITTED, _condition_time(conditions, "Admitted")))
    launcher = world.launcher_pod
    reported = _reported(world)
    steps += [
        (SCHEDULED, _kth([_condition_time(_conditions(pod), "PodScheduled") for pod in workers], needed)),
        (CONTAINERS_STARTED, _kth([_started(pod, ROLE_WORKER) for pod in workers], needed)),
        (WORKERS_READY, _kth([_condition_time(_conditions(pod), "Ready") if is_ready(pod) else None
                              for pod in workers], needed)),
        (LAUNCHER_STARTED, _started(launcher, ROLE_LAUNCHER) if launcher is not None else None),
        (WORLD_UP, reported.get(WORLD_UP)),
        (FIRST_STEP, reported.get(FIRST_STEP)),
    ]
    return steps


def _waiting_for(world: World, phase: str) -> str:
    """What the attempt waits for to reach `phase`, naming the first pod that holds it up."""
    job = world.job
    workers = [pod for index, pod in sorted(world.live_workers.items()) if index < job.spec.workers]
    if phase in (CREATED, RESTARTED):
        return "the operator to create the worker pods"
    if phase == ADMITTED:
        return f"Kueue to admit the workers (LocalQueue {job.queue.name if job.queue else '?'})"
    if phase == SCHEDULED:
        pod = next((p for p in workers if _condition_time(_conditions(p), "PodScheduled") is None), None)
        return f"a node for worker pod {_name(pod)}" if pod else "the worker pods to be created"
    if phase == CONTAINERS_STARTED:
        pod = next((p for p in workers if _started(p, ROLE_WORKER) is None), None)
        return f"worker pod {_name(pod)}'s container to start{_waiting_reason(pod, ROLE_WORKER)}"
    if phase == WORKERS_READY:
        pod = next((p for p in workers if not is_ready(p)), None)
        return f"worker pod {_name(pod)}'s sshd to accept connections (Ready)"
    if phase == LAUNCHER_STARTED:
        launcher = world.launcher_pod
        if launcher is None:
            return "the operator to create the launcher"
        return f"launcher pod {_name(launcher)}'s container to start{_waiting_reason(launcher, ROLE_LAUNCHER)}"
    if phase == WORLD_UP:
        return ("rank 0 to start Horovod: ssh to every worker, Python and TensorFlow imports (a program on trainlib "
                "reports it; another never does)")
    return "rank 0's first training step: its data and graph tracing"


def _recorded(world: World) -> dict[str, datetime]:
    """The phases status.startup already has for this attempt, with their times."""
    startup = world.status.get("startup")
    if not isinstance(startup, Mapping) or startup.get("attempt") != world.attempt:
        return {}
    found = {}
    for phase in startup.get("phases") or []:
        moment = read_time(phase.get("at")) if isinstance(phase, Mapping) else None
        if moment is not None:
            found[str(phase.get("name"))] = moment
    return found


def _reported(world: World) -> dict[str, datetime]:
    """What rank 0 of this attempt reported (status.progress.startup): times it cannot read are left out, and so is
    a report of another attempt."""
    startup = (world.status.get("progress") or {}).get("startup")
    if not isinstance(startup, Mapping) or startup.get("attempt") != world.attempt:
        return {}
    found = {}
    for phase, key in REPORTED.items():
        moment = read_time(startup.get(key))
        if moment is not None:
            found[phase] = moment
    return found


def _kth(times: Sequence[datetime | None], needed: int) -> datetime | None:
    """When `needed` of the pods had reached a state: the needed-th earliest time, None before."""
    known = sorted(t for t in times if t is not None)
    return known[needed - 1] if 0 < needed <= len(known) else None


def _started(pod: Obj | None, container: str) -> datetime | None:
    """When the pod's `container` started (running, or since ended)."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            state = status.get("state") or {}
            return read_time((state.get("running") or state.get("terminated") or {}).get("startedAt"))
    return None


def _waiting_reason(pod: Obj | None, container: str) -> str:
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
        if status.get("name") == container and reason:
            return f" ({reason})"
    return ""


def _condition_time(conditions: Sequence[Obj], kind: str) -> datetime | None:
    found = next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)
    return read_time(found.get("lastTransitionTime")) if found else None


def _conditions(pod: Obj) -> list[Obj]:
    return list((pod.get("status") or {}).get("conditions") or [])


def _created(pod: Obj) -> datetime | None:
    return read_time((pod.get("metadata") or {}).get("creationTimestamp"))


def _name(pod: Obj | None) -> str:
    return str(((pod or {}).get("metadata") or {}).get("name", "?"))


def _stamp(moment: datetime) -> str:
    """RFC 3339 in UTC, with milliseconds when the time has a fraction of a second."""
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return iso(moment)
