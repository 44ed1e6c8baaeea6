"""The startup timeline in status.startup: each phase from the job's creation to rank 0's first step, the seconds
between them, and what a stuck attempt waits for; then how `kubetrain status` and `--watch` show it."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

from dtr_bodies import training

from kubetrain import follow
from kubetrain import reasons as r
from kubetrain.api import parse_job
from kubetrain.manifests.env import job_environment
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.plan import Children, decide
from kubetrain.report import format_status

T0 = datetime(2026, 11, 21, 12, 0, 0)
NOW = T0 + timedelta(minutes=1)


def at(seconds: float) -> str:
    moment = T0 + timedelta(seconds=seconds)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def job_of(labels: dict[str, str] | None = None, **spec: Any) -> Any:
    body = training(**spec)
    body["metadata"]["creationTimestamp"] = at(0)
    body["metadata"]["labels"] = labels or {}
    return parse_job(body)


def worker(job: Any, index: int, scheduled: float | None = 1, started: float | None = 2, ready: float | None = 4,
           attempt: int = 0, created: float = 0.5) -> dict:
    """A worker pod of `attempt`, with the times (seconds after T0) Kubernetes gives it; None: not yet."""
    pod = build_worker_pod(job, index, attempt)
    pod["metadata"]["creationTimestamp"] = at(created)
    conditions = [{"type": "PodScheduled", "status": "True" if scheduled is not None else "False",
                   **({"lastTransitionTime": at(scheduled)} if scheduled is not None else {})},
                  {"type": "Ready", "status": "True" if ready is not None else "False",
                   **({"lastTransitionTime": at(ready)} if ready is not None else {})}]
    state = {"running": {"startedAt": at(started)}} if started is not None else {"waiting": {"reason":
                                                                                             "ContainerCreating"}}
    pod["status"] = {"phase": "Running" if started is not None else "Pending", "conditions": conditions,
                     "containerStatuses": [{"name": "worker", "state": state}]}
    return pod


def launcher(job: Any, started: float | None = 5, attempt: int = 0) -> tuple[dict, dict]:
    batch = build_launcher_job(job, attempt)
    batch["status"] = {}
    state = {"running": {"startedAt": at(started)}} if started is not None else {"waiting": {"reason":
                                                                                             "ContainerCreating"}}
    pod = {"metadata": {**copy.deepcopy(batch["spec"]["template"]["metadata"]), "name": "cifar-launcher-abc",
                        "creationTimestamp": at(4.5)},
           "status": {"phase": "Running" if started is not None else "Pending",
                      "containerStatuses": [{"name": "launcher", "state": state}]}}
    return batch, pod


def config_children(job: Any) -> dict[str, list[dict]]:
    from kubetrain.manifests.hosts import build_hosts_configmap
    from kubetrain.manifests.service import build_service

    return {"services": [build_service(job)], "configmaps": [build_hosts_configmap(job)],
            "secrets": [{"metadata": {"name": "cifar-ssh"}}]}


def reported(attempt: int = 0, world_up: str | None = None, first_step: str | None = None) -> dict[str, Any]:
    startup: dict[str, Any] = {"attempt": attempt}
    if world_up:
        startup["worldUpAt"] = world_up
    if first_step:
        startup["firstStepAt"] = first_step
    return {"progress": {"startup": startup}}


def running_world(job: Any, status: dict[str, Any] | None = None, **launcher_times: Any) -> dict[str, Any]:
    batch, pod = launcher(job, **launcher_times)
    children = Children(pods=[worker(job, 0), worker(job, 1, started=3, ready=5), pod], jobs=[batch],
                        **config_children(job))
    return decide(job, {"phase": r.RUNNING, **(status or {})}, children, NOW).status


def names(startup: dict[str, Any]) -> list[str]:
    return [phase["name"] for phase in startup["phases"]]


def test_every_phase_from_creation_to_the_first_step_with_the_seconds_between_them() -> None:
    job = job_of()
    status = running_world(job, reported(world_up=at(12.25), first_step=at(20.5)))
    startup = status["startup"]
    assert [(p["name"], p["at"], p["seconds"]) for p in startup["phases"]] == [
        ("Created", at(0), 0.0),
        ("Scheduled", at(1), 1.0),
        ("ContainersStarted", at(3), 2.0),  # the last of the two workers
        ("WorkersReady", at(5), 2.0),
        ("LauncherStarted", at(5), 0.0),
        ("WorldUp", at(12.25), 7.2),
        ("FirstStep", at(20.5), 8.2),
    ]
    assert startup["attempt"] == 0 and startup["seconds"] == 20.5
    assert startup["waitingFor"] is None and startup["waitingSince"] is None


def test_a_stuck_attempt_names_the_phase_and_the_pod_it_waits_for_and_since_when() -> None:
    job = job_of()
    children = Children(pods=[worker(job, 0), worker(job, 1, ready=None)], **config_children(job))
    startup = decide(job, {"phase": r.PENDING}, children, NOW).status["startup"]
    assert names(startup) == ["Created", "Scheduled", "ContainersStarted"]
    assert startup["waitingFor"] == "worker pod cifar-worker-1's sshd to accept connections (Ready)"
    assert startup["waitingSince"] == at(2)
    unstarted = Children(pods=[worker(job, 0), worker(job, 1, started=None, ready=None)], **config_children(job))
    startup = decide(job, {"phase": r.PENDING}, unstarted, NOW).status["startup"]
    assert startup["waitingFor"] == "worker pod cifar-worker-1's container to start (ContainerCreating)"
    unplaced = Children(pods=[worker(job, 0, scheduled=None, started=None, ready=None), worker(job, 1)],
                        **config_children(job))
    assert decide(job, {"phase": r.PENDING}, unplaced, NOW).status["startup"]["waitingFor"] == \
        "a node for worker pod cifar-worker-0"


def test_after_the_launcher_starts_it_waits_for_rank_0s_reports() -> None:
    job = job_of()
    startup = running_world(job)["startup"]
    assert names(startup)[-1] == "LauncherStarted"
    assert startup["waitingFor"].startswith("rank 0 to start Horovod")
    startup = running_world(job, reported(world_up=at(9)))["startup"]
    assert names(startup)[-1] == "WorldUp"
    assert startup["waitingFor"] == "rank 0's first training step: its data and graph tracing"
    batch, pod = launcher(job, started=None)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    startup = decide(job, {"phase": r.STARTING}, children, NOW).status["startup"]
    assert startup["waitingFor"] == "launcher pod cifar-launcher-abc's container to start (ContainerCreating)"


def test_rank_0s_report_counts_only_for_this_attempt_and_only_with_times_that_read() -> None:
    job = job_of()
    for status in (reported(attempt=1, world_up=at(12), first_step=at(20)),
                   reported(world_up="soon", first_step=at(20)),
                   {"progress": {"startup": "up"}}):
        assert names(running_world(job, status)["startup"])[-1] == "LauncherStarted", status
    # a first step without a world up is not a timeline: the chain stops at the first phase not reached
    assert names(running_world(job, reported(first_step=at(20)))["startup"])[-1] == "LauncherStarted"
    # a first step before the world was up is an earlier attempt's (a report that kept it)
    assert names(running_world(job, reported(world_up=at(12), first_step=at(3)))["startup"])[-1] == "WorldUp"


def test_a_later_attempt_starts_at_its_first_worker_pod() -> None:
    job = job_of()
    batch, pod = launcher(job, started=65, attempt=1)
    pods = [worker(job, 0, created=61, scheduled=61, started=62, ready=63, attempt=1),
            worker(job, 1, created=61.5, scheduled=62, started=62, ready=64, attempt=1), pod]
    status = {"phase": r.RUNNING, "attempt": 1, "restarts": 1, **reported(attempt=1, world_up=at(70))}
    startup = decide(job, status, Children(pods=pods, jobs=[batch], **config_children(job)), NOW).status["startup"]
    assert startup["attempt"] == 1
    assert [(p["name"], p["at"]) for p in startup["phases"]][:2] == [("Restarted", at(61)), ("Scheduled", at(62))]
    assert names(startup)[-1] == "WorldUp" and startup["seconds"] == 9.0


def test_a_restart_begins_a_new_timeline_that_waits_for_the_old_pods() -> None:
    job = job_of()
    batch, pod = launcher(job)
    pod["status"] = {"phase": "Failed", "containerStatuses": [{"name": "launcher", "state": {"terminated": {
        "exitCode": 1, "startedAt": at(5), "finishedAt": at(30)}}}]}
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, **reported(world_up=at(9), first_step=at(12))}, children, NOW)
    assert plan.status["phase"] == r.RESTARTING
    assert plan.status["startup"] == {"attempt": 1, "phases": [], "seconds": None,
                                      "waitingFor": "the last attempt's pods to go away",
                                      "waitingSince": "2026-11-21T12:01:00Z"}


def test_a_finished_job_keeps_its_timeline_and_waits_for_nothing() -> None:
    job = job_of()
    batch, pod = launcher(job)
    batch["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    pod["status"]["phase"] = "Succeeded"
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    waiting = running_world(job)["startup"]  # a program that never reports its start
    plan = decide(job, {"phase": r.RUNNING, "startup": waiting}, children, NOW)
    assert plan.status["phase"] == r.SUCCEEDED
    assert plan.status["startup"] == {**waiting, "waitingFor": None, "waitingSince": None}


def test_a_queued_job_is_admitted_between_its_creation_and_its_scheduling() -> None:
    job = job_of({"kueue.x-k8s.io/queue-name": "team-a"})
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    admitted = {"type": "Admitted", "status": "True", "reason": r.ADMITTED, "message": "",
                "lastTransitionTime": at(0.0)}
    startup = decide(job, {"phase": r.RUNNING, "conditions": [admitted]}, children, NOW).status["startup"]
    assert names(startup)[:3] == ["Created", "Admitted", "Scheduled"]
    gated = Children(**config_children(job))
    startup = decide(job, {"phase": r.PENDING}, gated, NOW).status["startup"]
    assert names(startup) == ["Created"] and startup["waitingFor"] == "Kueue to admit the workers (LocalQueue team-a)"


def test_an_elastic_job_starts_with_the_workers_it_needs() -> None:
    job = job_of(workers=3, elastic={"minWorkers": 2, "maxWorkers": 3})
    children = Children(pods=[worker(job, 0), worker(job, 1, ready=6), worker(job, 2, ready=None)],
                        **config_children(job))
    startup = decide(job, {"phase": r.PENDING}, children, NOW).status["startup"]
    # minWorkers Ready is what the launcher waits for: the second of the three workers at 6 s
    assert [(p["name"], p["at"]) for p in startup["phases"]][-1] == ("WorkersReady", at(6))


def test_each_pod_tells_its_ranks_their_attempt() -> None:
    job = job_of()
    env = {e["name"]: e.get("value") for e in build_worker_pod(job, 0, 3)["spec"]["containers"][0]["env"]}
    assert env["KUBETRAIN_ATTEMPT"] == "3"
    launcher_env = {e["name"]: e.get("value")
                    for e in build_launcher_job(job, 3)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert launcher_env["KUBETRAIN_ATTEMPT"] == "3"
    assert "KUBETRAIN_ATTEMPT" in launcher_env["KUBETRAIN_FORWARD_ENV"].split()  # mpirun -x hands it to every rank
    assert "KUBETRAIN_ATTEMPT" not in job_environment(job, in_pod=False)


def test_kubetrain_status_shows_the_timeline_and_how_long_it_has_waited() -> None:
    job = job_of()
    children = Children(pods=[worker(job, 0), worker(job, 1, ready=None)], **config_children(job))
    status = decide(job, {"phase": r.PENDING}, children, NOW).status
    text = format_status({"metadata": {"name": "cifar", "namespace": "ml"}, "status": status},
                         now=T0 + timedelta(seconds=97))
    assert "  startup:    attempt 0 (2 s): Created, Scheduled +1s, ContainersStarted +1s\n" in text
    assert "  waiting:    for worker pod cifar-worker-1's sshd to accept connections (Ready), 95 s so far\n" in text
    assert follow.snapshot({"status": status}).startup == "ContainersStarted@2s"
    assert "startup=ContainersStarted@2s" in follow.line(follow.snapshot({"status": status}), NOW)


def test_a_phase_keeps_the_time_it_was_recorded_with() -> None:
    job = job_of(workers=3, elastic={"minWorkers": 1, "maxWorkers": 3})
    first = running_world(job, reported(world_up=at(12), first_step=at(20)))
    assert first["startup"]["phases"][3] == {"name": "WorkersReady", "at": at(4), "seconds": 2.0}
    # worker 0 was replaced since: its successor became Ready at 40 s, which changes nothing of this start
    batch, pod = launcher(job)
    later = Children(pods=[worker(job, 0, created=38, scheduled=38, started=39, ready=40), worker(job, 1, ready=41),
                           pod], jobs=[batch], **config_children(job))
    again = decide(job, {"phase": r.RUNNING, **reported(world_up=at(12), first_step=at(20)),
                         "startup": first["startup"]}, later, NOW).status["startup"]
    assert again == first["startup"]


def test_a_first_step_recorded_from_an_earlier_attempts_report_gives_way_to_this_attempts() -> None:
    job = job_of()
    stale = running_world(job, reported(world_up=at(12), first_step=at(20)))["startup"]
    stale["phases"][-1]["at"] = at(3)  # before WorldUp: what a report that kept an older firstStepAt left
    startup = running_world(job, {**reported(world_up=at(12), first_step=at(21)), "startup": stale})["startup"]
    assert startup["phases"][-1] == {"name": "FirstStep", "at": at(21), "seconds": 9.0}
