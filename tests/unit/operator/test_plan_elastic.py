"""The reconcile decision for an elastic job (spec.elastic): a worker that leaves is replaced while the launcher goes
on, the status and events say who left and who joined, and only too few workers for too long restart the job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dtr_bodies import training
from test_plan import NOW, config_children, launcher, worker

from kubetrain import reasons as r
from kubetrain.api import parse_job
from kubetrain.manifests.service import build_ready_service
from kubetrain.plan import Children, Create, Delete, Plan, decide

ELASTIC = {"minWorkers": 2, "maxWorkers": 4}


def elastic_job(workers: int = 3, **overrides: Any) -> Any:
    return parse_job(training(workers=workers, elastic=ELASTIC, **overrides))


def pod(job: Any, index: int, uid: str = "", **kwargs: Any) -> dict:
    made = worker(job, index, **kwargs)
    made["metadata"]["uid"] = uid or f"uid-{index}"
    made["metadata"]["creationTimestamp"] = "2026-11-21T11:00:00Z"
    return made


def children(job: Any, pods: list[dict], with_launcher: bool = True) -> Children:
    config = config_children(job)
    config["services"].append(build_ready_service(job))
    batch, launcher_pod = launcher(job)
    batch["metadata"]["creationTimestamp"] = "2026-11-21T11:30:00Z"
    return Children(pods=[*pods, *([launcher_pod] if with_launcher else [])],
                    jobs=[batch] if with_launcher else [], **config)


def running_status(job: Any, members: list[int], **extra: Any) -> dict:
    return {"phase": r.RUNNING, "attempt": 0, "restarts": 0, "startTime": "2026-11-21T11:00:00Z",
            "workers": {"members": [{"name": f"cifar-worker-{i}", "uid": f"uid-{i}"} for i in members]}, **extra}


def deleted(plan: Plan) -> list[str]:
    return [a.name for a in plan.actions if isinstance(a, Delete)]


def created_pods(plan: Plan) -> list[str]:
    return [a.obj["metadata"]["name"] for a in plan.actions if isinstance(a, Create) and a.obj["kind"] == "Pod"]


def killed(job: Any, index: int) -> dict:
    terminated = {"terminated": {"exitCode": 137, "reason": "Error"}}
    return pod(job, index, phase="Failed", ready=False, containerStatuses=[{"name": "worker", "state": terminated}])


def test_a_failed_worker_is_replaced_while_the_launcher_goes_on() -> None:
    job = elastic_job()
    status = running_status(job, [0, 1, 2])
    plan = decide(job, status, children(job, [pod(job, 0), killed(job, 1), pod(job, 2)]), NOW)
    assert deleted(plan) == ["cifar-worker-1"]  # the launcher stays
    assert plan.status["phase"] == r.RUNNING and plan.status["restarts"] == 0
    assert plan.status["attempt"] == 0
    workers = plan.status["workers"]
    assert [m["name"] for m in workers["members"]] == ["cifar-worker-0", "cifar-worker-2"]
    assert workers["lastLeft"].startswith("cifar-worker-1 at 2026-11-21T12:00:00Z: worker pod cifar-worker-1 failed")
    assert "exit code 137" in workers["lastLeft"]
    assert (workers["ready"], workers["total"], workers["min"], workers["max"]) == (2, 3, 2, 4)
    assert [(e.reason, e.type) for e in plan.events] == [(r.WORKER_LEFT, "Warning")]
    assert "cifar-worker-1 left the training" in plan.events[0].message

    # the name is free: a new pod for the same index, same attempt; nobody leaves twice
    status = {**status, **plan.status}
    plan = decide(job, status, children(job, [pod(job, 0), pod(job, 2)]), NOW)
    assert created_pods(plan) == ["cifar-worker-1"] and not deleted(plan)
    assert plan.actions[-1].obj["metadata"]["labels"]["kubetrain.dev/attempt"] == "0"
    assert not [e for e in plan.events if e.reason == r.WORKER_LEFT]

    # it is Ready: it joins
    status = {**status, **plan.status}
    later = NOW + timedelta(seconds=20)
    plan = decide(job, status, children(job, [pod(job, 0), pod(job, 1, uid="uid-new"), pod(job, 2)]), later)
    assert [e.reason for e in plan.events] == [r.WORKER_JOINED]
    assert plan.status["workers"]["lastJoined"] == "cifar-worker-1 at 2026-11-21T12:00:20Z"
    assert {"name": "cifar-worker-1", "uid": "uid-new"} in plan.status["workers"]["members"]
    assert plan.status["restarts"] == 0 and not deleted(plan) and not created_pods(plan)


def test_a_worker_deleted_by_a_user_or_evicted_is_replaced_not_restarted() -> None:
    job = elastic_job()
    going = pod(job, 2)
    going["metadata"]["deletionTimestamp"] = "2026-11-21T11:59:50Z"
    going["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                          "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"})
    plan = decide(job, running_status(job, [0, 1, 2]), children(job, [pod(job, 0), pod(job, 1), going]), NOW)
    assert plan.status["phase"] == r.RUNNING and plan.status["restarts"] == 0
    assert not deleted(plan) and not created_pods(plan)  # waits for the name, then re-creates it
    assert "EvictionByEvictionAPI" in plan.status["workers"]["lastLeft"]


def test_a_static_job_still_restarts_every_worker_on_a_failure() -> None:
    job = parse_job(training(workers=3))
    plan = decide(job, running_status(job, []), children(job, [pod(job, 0), killed(job, 1), pod(job, 2)]), NOW)
    assert plan.status["phase"] == r.RESTARTING and plan.status["restarts"] == 1
    assert sorted(deleted(plan)) == ["cifar-launcher", *(f"cifar-worker-{i}" for i in range(3))]


def test_a_fail_job_rule_still_fails_an_elastic_job() -> None:
    policy = {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                                   "values": [137]}}]}}
    job = elastic_job(runPolicy=policy)
    plan = decide(job, running_status(job, [0, 1, 2]), children(job, [pod(job, 0), killed(job, 1), pod(job, 2)]), NOW)
    assert plan.status["phase"] == r.FAILED
    assert "podFailurePolicy rule 0" in plan.status["message"]


def test_the_launcher_failing_restarts_an_elastic_job_as_a_static_one() -> None:
    job = elastic_job()
    kids = children(job, [pod(job, 0), pod(job, 1), pod(job, 2)])
    kids.jobs[0]["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    plan = decide(job, running_status(job, [0, 1, 2]), kids, NOW)
    assert plan.status["phase"] == r.RESTARTING and plan.status["restarts"] == 1
    assert plan.status["workers"]["members"] == []


def test_too_few_workers_restart_the_job_only_after_wait_for_workers_seconds() -> None:
    job = elastic_job(launcher={"waitForWorkersSeconds": 60})
    pods = [pod(job, 0), pod(job, 1, ready=False), pod(job, 2, ready=False)]
    plan = decide(job, running_status(job, [0]), children(job, pods), NOW)
    assert plan.status["phase"] == r.RUNNING and plan.status["restarts"] == 0
    condition = next(c for c in plan.status["conditions"] if c["type"] == r.COND_MIN_WORKERS_READY)
    assert condition["status"] == "False" and "restarts if this lasts 60s" in condition["message"]
    assert plan.requeue_after is not None and plan.requeue_after <= 60

    status = {**running_status(job, [0]), **plan.status}
    plan = decide(job, status, children(job, pods), NOW + timedelta(seconds=30))
    assert plan.status["phase"] == r.RUNNING
    plan = decide(job, status, children(job, pods), NOW + timedelta(seconds=61))
    assert plan.status["phase"] == r.RESTARTING and plan.status["reason"] == r.TOO_FEW_WORKERS
    assert plan.status["restarts"] == 1


def test_the_launcher_starts_once_min_workers_are_ready() -> None:
    job = elastic_job()
    one = [pod(job, 0), pod(job, 1, ready=False), pod(job, 2, ready=False)]
    plan = decide(job, {}, children(job, one, with_launcher=False), NOW)
    assert "Job" not in [a.obj["kind"] for a in plan.actions if isinstance(a, Create)]
    two = [pod(job, 0), pod(job, 1), pod(job, 2, ready=False)]
    plan = decide(job, {}, children(job, two, with_launcher=False), NOW)
    assert "Job" in [a.obj["kind"] for a in plan.actions if isinstance(a, Create)]
    assert plan.status["phase"] == r.STARTING


def test_scaling_up_adds_workers_and_down_removes_the_highest() -> None:
    up = elastic_job(workers=4)
    plan = decide(up, running_status(up, [0, 1, 2]), children(up, [pod(up, 0), pod(up, 1), pod(up, 2)]), NOW)
    assert created_pods(plan) == ["cifar-worker-3"] and not deleted(plan)
    assert plan.status["workers"]["total"] == 4

    down = elastic_job(workers=2)
    plan = decide(down, running_status(down, [0, 1, 2]), children(down, [pod(down, 0), pod(down, 1), pod(down, 2)]),
                  NOW)
    assert deleted(plan) == ["cifar-worker-2"] and not created_pods(plan)
    assert plan.status["phase"] == r.RUNNING and plan.status["restarts"] == 0
    assert plan.status["workers"]["lastLeft"].endswith("scaled down to 2 workers")


def test_the_ready_endpoints_list_the_ready_workers_the_operator_created_and_no_other_pod() -> None:
    job = elastic_job()
    pods = [pod(job, 0), pod(job, 1), pod(job, 2, ready=False), pod(job, 9), killed(job, 1)]
    pods = [pods[0], pods[2], pods[3], pods[4]]  # worker 1 was killed: it leaves the training
    forged = pod(job, 0, uid="forged")  # the job's labels and owner, another name
    forged["metadata"]["name"] = "impostor"
    for index, made in enumerate([*pods, forged]):
        made["status"]["podIP"] = f"10.0.0.{index + 1}"
    plan = decide(job, running_status(job, [0, 1, 2]), children(job, [*pods, forged]), NOW)
    (endpoints,) = [a.obj for a in plan.actions if isinstance(a, Create) and a.obj["kind"] == "EndpointSlice"]
    assert [(e["hostname"], e["targetRef"]["uid"]) for e in endpoints["endpoints"]] == [("cifar-worker-0", "uid-0")]
