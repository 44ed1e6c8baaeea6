"""A failed attempt's launcher output outlives its pods. Before a plan deletes the launcher Job or a launcher pod of an
attempt that ended without success, or ends an attempt that had a launcher, it copies that attempt's log into the
attempt's ConfigMap first (SaveLog; kubetrain.log_copy makes the copy and deletes those it pushes out).

A succeeded job's log stays in its launcher pod (cleanPodPolicy keeps it), and a suspended attempt resumes under its
own number: neither is copied."""

from __future__ import annotations

from kubetrain import reasons as r
from kubetrain.contract import ROLE_LAUNCHER, launcher_name
from kubetrain.plan.model import Delete, Obj, Plan, SaveLog, attempt_of, role_of
from kubetrain.plan.world import World


def saves(world: World, plan: Plan) -> list[SaveLog]:
    """The copies `plan` needs before its deletions: one per attempt whose launcher output it takes away."""
    if (plan.status.get("phase") or world.status.get("phase")) in (r.SUCCEEDED, r.SUSPENDED):
        return []
    children, name = world.children, launcher_name(world.job.name)
    deleted = {(action.kind, action.name) for action in plan.actions if isinstance(action, Delete)}
    launchers = [pod for pod in children.pods if role_of(pod) == ROLE_LAUNCHER]
    lost = {attempt_of(pod) for pod in launchers if ("Pod", pod["metadata"]["name"]) in deleted}
    launcher_job = children.named(children.jobs, name)
    if launcher_job is not None and ("Job", name) in deleted:
        lost.add(attempt_of(launcher_job))
    if plan.status.get("attempt", world.attempt) != world.attempt and world.launcher is not None:
        lost.add(world.attempt)  # the plan ends an attempt whose launcher ran, or was to run
    return [SaveLog(attempt, _newest(launchers, attempt)) for attempt in sorted(lost)]


def _newest(launchers: list[Obj], attempt: int) -> str | None:
    pods = sorted((pod for pod in launchers if attempt_of(pod) == attempt),
                  key=lambda pod: pod["metadata"].get("creationTimestamp") or "")
    return str(pods[-1]["metadata"]["name"]) if pods else None
