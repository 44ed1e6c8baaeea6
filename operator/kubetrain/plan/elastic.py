"""Elastic jobs (spec.elastic): a worker that leaves is replaced while the launcher goes on (Horovod shrinks the
training to the workers left and grows it back when the replacement is Ready). The status keeps who is in the
training; the whole job restarts only when fewer than minWorkers stay Ready for longer than
launcher.waitForWorkersSeconds, which is also how long Horovod waits for them (the launcher's --elastic-timeout)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetrain import reasons as r
from kubetrain.contract import ROLE_WORKER
from kubetrain.failure_policy import Cause
from kubetrain.plan.model import Event, Obj, parse_time
from kubetrain.plan.world import World
from kubetrain.pod_state import Failure, is_disrupted, is_ready, is_terminating, iso, pod_failure, pod_phase


def departing(world: World) -> dict[int, Failure]:
    """The current attempt's workers within spec.workers that left and are to be replaced (exited, failed, evicted,
    deleted), by index, with why. A worker the image cannot start (pull or container errors) is not among them: a
    new pod would fail the same way, so the job fails or restarts as a non-elastic one does."""
    return {index: failure for index, pod in world.workers.items()
            if index < world.job.spec.workers and (failure := left(pod)) is not None}


def left(pod: Obj) -> Failure | None:
    """Why a worker pod is out of the training for good, or None while it may still train."""
    failure = pod_failure(pod, ROLE_WORKER)
    if is_terminating(pod):
        name = pod["metadata"]["name"]
        return failure or Failure(r.WORKER_LOST, f"worker pod {name} was deleted", Cause("Worker"))
    if failure is not None and (pod_phase(pod) in ("Failed", "Succeeded") or is_disrupted(pod)):
        return failure
    return None


def too_few_for(world: World) -> float | None:
    """Seconds the running training has had fewer than minWorkers Ready (MinWorkersReady False), or None."""
    elastic = world.job.spec.elastic
    if elastic is None or world.launcher is None or world.ready_count >= elastic.min_workers:
        return None
    conditions = world.status.get("conditions") or []
    condition: Obj = next((c for c in conditions if c.get("type") == r.COND_MIN_WORKERS_READY), {})
    since = parse_time(condition.get("lastTransitionTime")) if condition.get("status") == "False" else None
    return (world.now - (since or world.now)).total_seconds()


def too_few_failure(world: World) -> Failure:
    elastic, wait = world.job.spec.elastic, world.job.spec.wait_for_workers_seconds
    assert elastic is not None
    return Failure(r.TOO_FEW_WORKERS, f"{world.ready_count} workers Ready, fewer than elastic.minWorkers="
                   f"{elastic.min_workers}, for longer than launcher.waitForWorkersSeconds={wait}", Cause("Worker"))


def min_condition(world: World) -> tuple[str, str, str]:
    """The MinWorkersReady condition of an elastic job."""
    elastic = world.job.spec.elastic
    assert elastic is not None
    ready = world.ready_count
    message = f"{ready} workers Ready, elastic.minWorkers={elastic.min_workers}"
    if ready >= elastic.min_workers:
        return "True", r.WORKERS_READY, message
    wait = world.job.spec.wait_for_workers_seconds
    return "False", r.TOO_FEW_WORKERS, f"{message}: the job restarts if this lasts {wait}s"


@dataclass
class Membership:
    """Who is in the training (status.workers.members), the last to leave and to join, and their events."""

    workers: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)


def membership(world: World, launcher_running: bool) -> Membership:
    """Compare the workers in the training (Ready since the launcher started, same pod) with the status' members:
    those gone left, Ready pods not yet members joined. Before the launcher runs nobody is a member."""
    previous = world.status.get("workers") or {}
    result = Membership({key: previous[key] for key in ("lastLeft", "lastJoined") if key in previous})
    if not launcher_running:
        result.workers["members"] = []
        return result
    old = {m.get("name"): m.get("uid") for m in previous.get("members") or []}
    staying = {_name(pod): _uid(pod) for index, pod in world.workers.items()
               if index < world.job.spec.workers and left(pod) is None}
    ready = {_name(pod): _uid(pod) for pod in world.workers.values()
             if is_ready(pod) and staying.get(_name(pod)) == _uid(pod)}
    when = iso(world.now)
    for name, uid in sorted(old.items()):
        if staying.get(name) != uid:
            why = _why_left(world, str(name), str(uid))
            result.workers["lastLeft"] = f"{name} at {when}: {why}"
            result.events.append(Event("Warning", r.WORKER_LEFT, f"{name} left the training ({why}); the others go on "
                                                                 "from their last commit"))
    # The workers Ready when the training starts are its first members, not joins.
    announce = world.status.get("phase") == r.RUNNING
    for name, uid in sorted(ready.items()):
        if old.get(name) != uid and announce:
            result.workers["lastJoined"] = f"{name} at {when}"
            result.events.append(Event("Normal", r.WORKER_JOINED, f"{name} is Ready: Horovod adds its ranks at the "
                                                                  "training's next commit"))
    members = {name: uid for name, uid in staying.items() if old.get(name) == uid or ready.get(name) == uid}
    result.workers["members"] = [{"name": name, "uid": uid} for name, uid in sorted(members.items())]
    return result


def _why_left(world: World, name: str, uid: str) -> str:
    pod = next((p for p in [*world.workers.values(), *world.departed.values()]
                if _name(p) == name and _uid(p) == uid), None)
    failure = left(pod) if pod is not None else None
    if failure is not None:
        return failure.message
    index = int(name.rsplit("-", 1)[1]) if name.rsplit("-", 1)[-1].isdigit() else -1
    if index >= world.job.spec.workers:
        return f"scaled down to {world.job.spec.workers} workers"
    return f"worker pod {name} is gone"


def _name(pod: Obj) -> str:
    return str(pod["metadata"]["name"])


def _uid(pod: Obj) -> str:
    return str(pod["metadata"].get("uid", ""))
