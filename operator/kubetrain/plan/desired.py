"""Desired versus actual children: what to create, correct or delete so the world matches the spec."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kubetrain.api import Job
from kubetrain.children import VOLCANO_POD_GROUP
from kubetrain.contract import (
    ROLE_LAUNCHER,
    ROLE_WORKER,
    launcher_name,
    pod_group_name,
    ssh_secret_name,
    worker_name,
)
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod, build_worker_pod_group
from kubetrain.manifests.service import build_ready_endpoints, build_ready_service, build_service
from kubetrain.plan.elastic import departing
from kubetrain.plan.model import (
    Action,
    Children,
    Create,
    CreateSshSecret,
    Delete,
    Obj,
    Patch,
    ReleaseGang,
    attempt_of,
    delete_of,
    parse_time,
    role_of,
)
from kubetrain.plan.world import World
from kubetrain.pod_state import is_ready, is_terminating, job_finished, pod_phase


def config_actions(job: Job, children: Children) -> list[Action]:
    """Secret, ConfigMap and Service: create when missing, correct drift."""
    desired = [
        (children.configmaps, build_hosts_configmap(job), "data"),
        (children.services, build_service(job), "spec"),
    ]
    ready_service = build_ready_service(job)
    if ready_service is not None:
        desired.append((children.services, ready_service, "spec"))
    actions = _converge(desired, children)
    secret = children.named(children.secrets, ssh_secret_name(job.name))
    if secret is None:
        actions.append(CreateSshSecret())
    return actions


def ready_endpoints_actions(world: World) -> list[Action]:
    """An elastic job's `<name>-ready` EndpointSlice: the Ready workers the operator created, no other pod, so the
    launcher's discovery finds only those (a pod with the job's labels is not one)."""
    job = world.job
    if job.spec.elastic is None:
        return []
    leaving = departing(world)
    ready = [(str(pod["metadata"]["name"]), str(pod["metadata"].get("uid", "")), str(pod["status"]["podIP"]))
             for index, pod in world.own_workers.items()
             if index not in leaving and is_ready(pod) and (pod.get("status") or {}).get("podIP")]
    slice_ = build_ready_endpoints(job, ready)
    existing = world.children.named(world.children.endpointslices, slice_["metadata"]["name"])
    if existing is None:
        return [Create(slice_)]
    # The API server stores an empty list of endpoints as none.
    if drifted(existing.get("endpoints") or [], slice_["endpoints"]) or drifted(existing.get("ports"), slice_["ports"]):
        return [Patch(slice_)]
    return []


def _converge(desired: list[tuple[list[Obj], dict[str, Any], str]], children: Children) -> list[Action]:
    """Create each desired object that is missing; patch back one whose `drift_key` part drifted."""
    actions: list[Action] = []
    for existing_list, obj, drift_key in desired:
        existing = children.named(existing_list, obj["metadata"]["name"])
        if existing is None:
            actions.append(Create(obj))
        elif drifted(existing.get(drift_key), obj[drift_key]):
            actions.append(Patch(obj))
    return actions


def drifted(actual: Any, desired: Any) -> bool:
    """True when a field we set differs; fields the API server adds (clusterIP, ...) are not drift."""
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return True
        return any(drifted(actual.get(key), value) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return True
        return any(drifted(a, d) for a, d in zip(actual, desired, strict=True))
    return bool(actual != desired)


def attempt_actions(world: World) -> tuple[list[Action], bool]:
    """The current attempt's workers, then its launcher once every worker is Ready; older attempts' pods and
    launcher go first. Returns the actions and
    whether something is still going away (look again soon)."""
    job, children, attempt = world.job, world.children, world.attempt
    elastic_departing = departing(world) if job.spec.elastic is not None else {}
    actions: list[Action] = []
    workers = world.live_workers
    waiting = False
    for pod in children.pods:
        if role_of(pod) == ROLE_WORKER and pod not in workers.values() and not is_terminating(pod):
            actions.append(delete_of("v1", "Pod", pod))
            waiting = True
    if job.spec.elastic is not None:  # replace the workers that left; scale down
        for index, pod in sorted(workers.items()):
            if index >= job.spec.workers or index in elastic_departing:
                actions.append(delete_of("v1", "Pod", pod))
                waiting = True
        workers = {index: pod for index, pod in workers.items()
                   if index < job.spec.workers and index not in elastic_departing}
    pod_group = build_worker_pod_group(job)
    if pod_group is not None and len(workers) < job.spec.workers:  # a create of the existing group returns it as is
        actions.append(Create(pod_group))
    for index in range(job.spec.workers):
        if index in workers:
            continue
        if children.named(children.pods, worker_name(job.name, index)) is not None:
            waiting = True  # an old attempt's pod with this name is still going away
            continue
        actions.append(Create(build_worker_pod(job, index, attempt)))
    # An elastic job's launcher waits for no worker going away (horovodrun adds workers as they come).
    blocked = waiting and job.spec.elastic is None
    launcher = children.named(children.jobs, launcher_name(job.name))
    if launcher is not None and attempt_of(launcher) != attempt:
        if not is_terminating(launcher):
            actions.append(delete_of("batch/v1", "Job", launcher))
        waiting = blocked = True
    enough = sum(1 for pod in workers.values() if is_ready(pod)) >= job.spec.workers_to_start
    launching = launcher is None and enough and not blocked
    if launching:
        actions.append(Create(build_launcher_job(job, attempt)))
    return actions, waiting


def delete_attempt(job: Job, children: Children) -> list[Action]:
    """Every worker pod and the launcher Job, for a restart or a suspend."""
    actions: list[Action] = [
        delete_of("v1", "Pod", pod)
        for pod in children.pods
        if role_of(pod) == ROLE_WORKER and not is_terminating(pod)
    ]
    launcher = children.named(children.jobs, launcher_name(job.name))
    if launcher is not None and not is_terminating(launcher):
        actions.append(delete_of("batch/v1", "Job", launcher))
    return actions


def clean_pods(job: Job, children: Children) -> list[Action]:
    """cleanPodPolicy at the end: Running deletes the pods still running, All every pod, None none.

    The pod of a launcher Job that has finished is never 'still running', whatever the cache last heard of it: its
    watch may lag the Job's, and deleting it would lose the training's log."""
    policy = job.spec.run_policy.clean_pod_policy
    if policy == "None":
        return []
    launcher = children.named(children.jobs, launcher_name(job.name))
    launcher_done = job_finished(launcher) is not None

    def still_running(pod: Obj) -> bool:
        if role_of(pod) == ROLE_LAUNCHER and launcher_done:
            return False
        return pod_phase(pod) in ("Pending", "Running")

    return [
        delete_of("v1", "Pod", pod)
        for pod in children.pods
        if not is_terminating(pod) and (policy == "All" or still_running(pod))
    ]


def release_gang(job: Job, children: Children, since: str | None) -> list[Action]:
    """What tells the gang scheduler that none of the job's workers is left (the job ended or is suspended `since`),
    so the gangs that wait for those nodes get them:
    - Coscheduling: a mark on the job's PodGroup (kubetrain.manifests.gang.release_patch), the same on every pass (the
      API server drops a patch that changes nothing);
    - Volcano: the PodGroup goes. Its `enqueue` action would take the empty group back into its queue and keep its
      minResources for it. The next attempt (a resume) creates it again with its workers."""
    gang = job.spec.scheduling.gang
    if gang is None or since is None or any(role_of(pod) == ROLE_WORKER for pod in children.pods):
        return []
    if gang.scheduler == "Coscheduling":
        return [ReleaseGang(since)]
    return [Delete(VOLCANO_POD_GROUP.api_version, VOLCANO_POD_GROUP.kind, pod_group_name(job.name))]


def ttl_remaining(world: World, completion_time: str | None) -> float | None:
    """Seconds until ttlSecondsAfterFinished deletes the job (<= 0: now); None without a TTL."""
    ttl = world.job.spec.run_policy.ttl_seconds_after_finished
    if ttl is None:
        return None
    completed = parse_time(completion_time) or world.now
    return (completed + timedelta(seconds=ttl) - world.now).total_seconds()
