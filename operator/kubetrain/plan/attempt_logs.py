"""A failed attempt's launcher output outlives its pods. Before a plan deletes the launcher Job or a launcher pod of an
attempt that ended without success, or ends an attempt that had a launcher, it copies that attempt's log into the
attempt's ConfigMap (SaveLog). The copies of the newest KEPT_ATTEMPTS attempts stay; older ones are deleted.

A succeeded job's log stays in its launcher pod (cleanPodPolicy keeps it), and a suspended attempt resumes under its
own number: neither is copied."""

from __future__ import annotations

from kubetrain import reasons as r
from kubetrain.contract import ROLE_ATTEMPT_LOG, ROLE_LAUNCHER, launcher_name
from kubetrain.manifests.attempt_log import KEPT_ATTEMPTS
from kubetrain.plan.model import Action, Children, Delete, Obj, Plan, SaveLog, attempt_of, role_of
from kubetrain.plan.world import World
from kubetrain.pod_state import is_terminating


def log_actions(world: World, plan: Plan) -> list[Action]:
    """The copies `plan` needs first, and the deletions of the copies that newer ones push out."""
    saves = _saves(world, plan)
    return [*saves, *_pushed_out(world.children, saves)]


def copies(children: Children) -> dict[int, str]:
    """The attempts whose launcher output is copied already, and their ConfigMaps' names."""
    return {attempt_of(configmap): str(configmap["metadata"]["name"]) for configmap in children.configmaps
            if role_of(configmap) == ROLE_ATTEMPT_LOG and not is_terminating(configmap)}


def _saves(world: World, plan: Plan) -> list[SaveLog]:
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
    done = copies(children)
    return [SaveLog(attempt, _newest(launchers, attempt)) for attempt in sorted(lost) if attempt not in done]


def _newest(launchers: list[Obj], attempt: int) -> str | None:
    pods = sorted((pod for pod in launchers if attempt_of(pod) == attempt),
                  key=lambda pod: pod["metadata"].get("creationTimestamp") or "")
    return str(pods[-1]["metadata"]["name"]) if pods else None


def _pushed_out(children: Children, saves: list[SaveLog]) -> list[Action]:
    done = copies(children)
    attempts = sorted(set(done) | {save.attempt for save in saves})
    return [Delete("v1", "ConfigMap", done[attempt]) for attempt in attempts[:-KEPT_ATTEMPTS] if attempt in done]
