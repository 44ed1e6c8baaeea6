"""The reconcile decision, table by table: given these children, the operator does this and says that."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from dtr_bodies import training

from kubetrain import reasons as r
from kubetrain.api import parse_job
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.plan import (
    Children,
    Create,
    CreateSshSecret,
    Delete,
    DeleteTraining,
    Plan,
    decide,
    status_changed,
)

NOW = datetime(2026, 11, 21, 12, 0, 0)


def job_of(**overrides: Any) -> Any:
    return parse_job(training(**overrides))


def worker(job: Any, index: int, phase: str = "Running", ready: bool = True, attempt: int = 0, **status: Any) -> dict:
    pod = build_worker_pod(job, index, attempt)
    pod["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        **status,
    }
    return pod


def launcher(job: Any, attempt: int = 0, finished: str | None = None) -> tuple[dict, dict]:
    batch = build_launcher_job(job, attempt)
    batch["status"] = {"conditions": [{"type": finished, "status": "True"}]} if finished else {}
    pod = {
        "metadata": {**batch["spec"]["template"]["metadata"], "name": "cifar-launcher-abc"},
        "status": {"phase": {"Complete": "Succeeded", "Failed": "Failed"}.get(finished or "", "Running")},
    }
    return batch, pod


def config_children(job: Any) -> dict[str, list[dict]]:
    """Pretend every config child exists (as the builders would make them)."""
    from kubetrain.manifests.hosts import build_hosts_configmap
    from kubetrain.manifests.service import build_service

    return {
        "services": [build_service(job)],
        "configmaps": [build_hosts_configmap(job)],
        "secrets": [{"metadata": {"name": "cifar-ssh"}}],
    }


def created_kinds(plan: Plan) -> list[str]:
    return [
        a.obj["kind"] if isinstance(a, Create) else "Secret"
        for a in plan.actions
        if isinstance(a, Create | CreateSshSecret)
    ]


def test_new_job_creates_config_and_workers_but_no_launcher_yet() -> None:
    job = job_of()
    plan = decide(job, {}, Children(), NOW)
    kinds = created_kinds(plan)
    assert sorted(kinds) == sorted(["ConfigMap", "Service", "Secret", "Pod", "Pod"])
    assert plan.status["phase"] == r.PENDING
    assert plan.status["workers"] == {"ready": 0, "total": 2, "summary": "0/2",
                                      "selector": "kubetrain.dev/job-name=cifar,kubetrain.dev/role=worker"}
    assert plan.status["startTime"] == "2026-11-21T12:00:00Z"


def test_second_pass_over_a_complete_world_creates_nothing() -> None:
    job = job_of()
    children = Children(pods=[worker(job, 0, ready=False), worker(job, 1, ready=False)], **config_children(job))
    assert decide(job, {"phase": r.PENDING}, children, NOW).actions == []


def test_launcher_is_created_only_when_every_worker_is_ready() -> None:
    job = job_of()
    half = Children(pods=[worker(job, 0), worker(job, 1, ready=False)], **config_children(job))
    assert "Job" not in created_kinds(decide(job, {}, half, NOW))
    ready = Children(pods=[worker(job, 0), worker(job, 1)], **config_children(job))
    plan = decide(job, {}, ready, NOW)
    assert created_kinds(plan) == ["Job"]
    assert plan.status["phase"] == r.STARTING


def test_running_launcher_means_running() -> None:
    job = job_of()
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    history = [{"epoch": epoch, "metrics": {"loss": 1.0 / epoch}} for epoch in (1, 2, 3)]
    plan = decide(job, {"phase": r.STARTING, "progress": {"epoch": 3, "epochs": 30, "metrics": {"loss": 0.5},
                                                          "history": history}}, children, NOW)
    assert plan.status["phase"] == r.RUNNING
    # the operator's merge patch names the summary alone: rank 0's fields, its history too, stay as they are
    assert plan.status["progress"] == {"summary": "3/30"} and plan.status["metric"] == "loss=0.5000"
    assert [e.reason for e in plan.events] == [r.LAUNCHER_RUNNING]


def test_the_metric_column_shows_the_one_rank_0_names_as_its_headline() -> None:
    job = job_of()
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    metrics = {"accuracy": 0.9, "loss": 0.3, "val_f1": 0.71234}
    status = {"phase": r.RUNNING, "progress": {"epoch": 3, "epochs": 30, "metrics": metrics, "headline": "val_f1"}}
    assert decide(job, status, children, NOW).status["metric"] == "val_f1=0.7123"
    status["progress"]["headline"] = "val_auc"  # named but not reported: the first metric by name
    assert decide(job, status, children, NOW).status["metric"] == "accuracy=0.9000"


def test_a_launcher_pod_that_succeeded_before_its_job_did_still_means_running() -> None:
    job = job_of()
    batch, pod = launcher(job)  # the Job's status has not caught up with its pod yet (seen on kind)
    pod["status"]["phase"] = "Succeeded"
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, "reason": r.LAUNCHER_RUNNING}, children, NOW)
    assert plan.status["phase"] == r.RUNNING and plan.events == []


def with_uid(obj: dict, uid: str, owner: str | None = None) -> dict:
    obj["metadata"]["uid"] = uid
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "cifar-launcher", "uid": owner}]
    return obj


def test_the_status_lists_the_pods_rank_0_may_report_from_and_no_pod_named_like_them() -> None:
    job = job_of()
    batch, pod = launcher(job)
    with_uid(batch, "launcher-job")
    forged = with_uid(worker(job, 99), "forged")  # same labels and owner, a name anyone may choose
    stray = with_uid(launcher(job)[1], "stray")  # a launcher-labelled pod the launcher Job does not own
    stray["metadata"]["name"] = "cifar-launcher-zzzzz"
    pods = [with_uid(worker(job, 0), "w0"), with_uid(worker(job, 1), "w1"), with_uid(pod, "l0", "launcher-job"),
            forged, stray]
    children = Children(pods=pods, jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING}, children, NOW)
    assert plan.status["podUIDs"] == ["l0", "w0", "w1"]

    oom = {"containerStatuses": [{"name": "worker", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}
    pods[1] = with_uid(worker(job, 1, phase="Failed", ready=False, **oom), "w1")
    restart = decide(job, {"phase": r.RUNNING, "podUIDs": ["l0", "w0", "w1"]}, children, NOW)
    assert restart.status["attempt"] == 1 and restart.status["podUIDs"] == []  # the old attempt reports no more


def test_a_resume_rank_0_reports_is_said_in_a_condition_and_one_event_naming_the_writer() -> None:
    job = job_of()  # uid uid-1
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    resumed = {"path": "/checkpoints/ml/cifar/ckpt-000007.h5", "epoch": 7, "writtenAt": "2026-11-20T10:00:00Z",
               "jobUID": "uid-old"}
    status: dict[str, Any] = {"phase": r.RUNNING, "checkpoint": {"resumedFrom": resumed}}
    plan = decide(job, status, children, NOW)
    condition = next(c for c in plan.status["conditions"] if c["type"] == r.COND_CHECKPOINT_RESTORED)
    assert condition["reason"] == r.RESUMED_FROM_ANOTHER_JOB and condition["message"].startswith(
        "resumed from epoch 7 of checkpoint /checkpoints/ml/cifar/ckpt-000007.h5 written at 2026-11-20T10:00:00Z by "
        "job uid uid-old, not this job (uid uid-1)")
    assert [(e.type, e.message) for e in plan.events] == [("Warning", condition["message"])]
    again = decide(job, {**status, "conditions": plan.status["conditions"]}, children, NOW)
    assert again.events == []  # said once
    resumed["jobUID"] = "uid-1"  # a restart of this job resumes its own checkpoint
    own = decide(job, {**status, "conditions": plan.status["conditions"]}, children, NOW)
    assert [(e.type, e.reason) for e in own.events] == [("Normal", r.RESUMED_FROM_CHECKPOINT)]
    assert own.events[0].message.endswith("by job uid uid-1 (this job)")


def test_a_secret_an_older_operator_wrote_is_left_as_it_is() -> None:
    """No host key in it: the operator may not patch Secrets; its pods mount it as optional (test_builders)."""
    job = job_of()
    children = Children(pods=[worker(job, 0, ready=False), worker(job, 1, ready=False)], **config_children(job))
    children.secrets = [{"metadata": {"name": "cifar-ssh"}}]
    assert decide(job, {"phase": r.PENDING}, children, NOW).actions == []


def test_unschedulable_workers_say_why() -> None:
    job = job_of(resources={"gpusPerWorker": 8})
    message = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    pending = worker(job, 0, phase="Pending", ready=False)
    pending["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    children = Children(pods=[pending, worker(job, 1, phase="Pending", ready=False)], **config_children(job))
    plan = decide(job, {}, children, NOW)
    assert plan.status["phase"] == r.PENDING and plan.status["reason"] == r.UNSCHEDULABLE
    assert message in plan.status["message"]
    assert any(e.type == "Warning" and e.reason == r.UNSCHEDULABLE for e in plan.events)


def test_failed_worker_restarts_the_whole_job_and_names_the_pod() -> None:
    job = job_of()
    batch, pod = launcher(job)
    oom = worker(
        job,
        1,
        phase="Failed",
        ready=False,
        containerStatuses=[{"name": "worker", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}],
    )
    children = Children(pods=[worker(job, 0), oom, pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, "restarts": 0, "attempt": 0}, children, NOW)
    assert plan.status["phase"] == r.RESTARTING and plan.status["restarts"] == 1 and plan.status["attempt"] == 1
    assert "cifar-worker-1" in plan.status["message"] and "OOMKilled (exit code 137)" in plan.status["message"]
    deleted = {(a.kind, a.name) for a in plan.actions if isinstance(a, Delete)}
    assert deleted == {("Pod", "cifar-worker-0"), ("Pod", "cifar-worker-1"), ("Job", "cifar-launcher")}


def test_a_delete_names_the_uid_it_was_decided_on() -> None:
    """The next attempt's pods take the same names: a delete must never reach them."""
    job = job_of()
    batch, pod = launcher(job)
    workers = [worker(job, 0), worker(job, 1, phase="Failed", ready=False)]
    for index, obj in enumerate([*workers, batch]):
        obj["metadata"]["uid"] = f"uid-{index}"
    plan = decide(job, {"phase": r.RUNNING, "attempt": 0}, Children(pods=[*workers, pod], jobs=[batch],
                                                                    **config_children(job)), NOW)
    assert {(a.name, a.uid) for a in plan.actions if isinstance(a, Delete)} == {
        ("cifar-worker-0", "uid-0"), ("cifar-worker-1", "uid-1"), ("cifar-launcher", "uid-2")}


def test_after_a_restart_old_pods_go_before_new_ones_come() -> None:
    job = job_of()
    old = worker(job, 0, attempt=0)
    old["metadata"]["deletionTimestamp"] = "2026-11-21T11:59:00Z"
    children = Children(pods=[old], **config_children(job))
    plan = decide(job, {"phase": r.RESTARTING, "restarts": 1, "attempt": 1}, children, NOW)
    created = [a.obj["metadata"]["name"] for a in plan.actions if isinstance(a, Create)]
    assert created == ["cifar-worker-1"]  # worker-0's name is still taken by the terminating pod
    assert created and build_worker_pod(job, 1, 1)["metadata"]["labels"]["kubetrain.dev/attempt"] == "1"
    assert plan.status["phase"] == r.RESTARTING and plan.requeue_after is not None


def test_backoff_limit_reached_fails_with_the_reason_and_keeps_the_failed_pod() -> None:
    job = job_of(runPolicy={"backoffLimit": 1})
    batch, pod = launcher(job, attempt=1)
    failed = worker(
        job,
        0,
        phase="Failed",
        ready=False,
        attempt=1,
        containerStatuses=[{"name": "worker", "state": {"terminated": {"reason": "Error", "exitCode": 3}}}],
    )
    children = Children(pods=[failed, worker(job, 1, attempt=1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING, "restarts": 1, "attempt": 1}, children, NOW)
    assert plan.status["phase"] == r.FAILED and plan.status["reason"] == r.WORKER_FAILED
    assert "backoffLimit 1 reached" in plan.status["message"] and plan.status["completionTime"]
    deleted = {a.name for a in plan.actions if isinstance(a, Delete)}
    assert "cifar-worker-0" not in deleted  # its logs stay for the user
    assert {"cifar-worker-1", "cifar-launcher"} <= deleted


def test_launcher_success_is_success_and_clean_pod_policy_applies() -> None:
    job = job_of(runPolicy={"cleanPodPolicy": "Running"})
    batch, pod = launcher(job, finished="Complete")
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING}, children, NOW)
    assert plan.status["phase"] == r.SUCCEEDED and plan.status["completionTime"] == "2026-11-21T12:00:00Z"
    assert {a.name for a in plan.actions if isinstance(a, Delete)} == {"cifar-worker-0", "cifar-worker-1"}


def test_clean_pod_policy_none_keeps_pods_and_all_removes_the_launcher_pod_too() -> None:
    for policy, expected in (("None", set()), ("All", {"cifar-worker-0", "cifar-worker-1", "cifar-launcher-abc"})):
        job = job_of(runPolicy={"cleanPodPolicy": policy})
        batch, pod = launcher(job, finished="Complete")
        children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
        plan = decide(job, {"phase": r.SUCCEEDED, "completionTime": "2026-11-21T11:00:00Z"}, children, NOW)
        assert {a.name for a in plan.actions if isinstance(a, Delete)} == expected, policy


def test_ttl_deletes_the_training_once_due() -> None:
    job = job_of(runPolicy={"ttlSecondsAfterFinished": 60})
    done = {"phase": r.SUCCEEDED, "completionTime": "2026-11-21T11:59:30Z"}
    early = decide(job, done, Children(), NOW)
    assert early.actions == [] and early.requeue_after == 30
    late = decide(job, done, Children(), NOW + timedelta(seconds=31))
    assert late.actions == [DeleteTraining()]


def test_active_deadline_fails_the_job() -> None:
    job = job_of(runPolicy={"activeDeadlineSeconds": 600})
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    status = {"phase": r.RUNNING, "startTime": "2026-11-21T11:49:00Z"}
    plan = decide(job, status, children, NOW)
    assert plan.status["phase"] == r.FAILED and plan.status["reason"] == r.DEADLINE_EXCEEDED
    assert Delete("batch/v1", "Job", "cifar-launcher") in plan.actions
    running = decide(job, {**status, "startTime": "2026-11-21T11:50:30Z"}, children, NOW)
    assert running.status["phase"] == r.RUNNING and running.requeue_after == 30  # looks again when it is due


def test_suspend_deletes_pods_and_keeps_config() -> None:
    job = job_of(runPolicy={"suspend": True})
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING}, children, NOW)
    assert plan.status["phase"] == r.SUSPENDED
    assert {(a.kind, a.name) for a in plan.actions} == {
        ("Pod", "cifar-worker-0"),
        ("Pod", "cifar-worker-1"),
        ("Job", "cifar-launcher"),
    }


def test_image_pull_errors_are_named() -> None:
    job = job_of()
    pulling = worker(
        job,
        0,
        phase="Pending",
        ready=False,
        containerStatuses=[
            {"name": "worker", "state": {"waiting": {"reason": "ErrImagePull", "message": "not found: kubetrain/x"}}}
        ],
    )
    plan = decide(job, {"phase": r.PENDING}, Children(pods=[pulling, worker(job, 1)], **config_children(job)), NOW)
    assert plan.status["reason"] == r.IMAGE_PULL_FAILED and "not found: kubetrain/x" in plan.status["message"]


def test_worker_lost_during_training_restarts() -> None:
    job = job_of()
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING}, children, NOW)
    assert plan.status["reason"] == r.WORKER_LOST and plan.status["phase"] == r.RESTARTING


def test_drifted_configmap_is_patched_back() -> None:
    job = job_of()
    config = config_children(job)
    config["configmaps"][0]["data"]["hostfile"] = "evil-host slots=99\n"
    plan = decide(job, {}, Children(pods=[worker(job, 0, ready=False), worker(job, 1, ready=False)], **config), NOW)
    assert [type(a).__name__ for a in plan.actions] == ["Patch"]


def test_status_is_not_rewritten_when_nothing_changed() -> None:
    job = job_of()
    children = Children(pods=[worker(job, 0, ready=False), worker(job, 1, ready=False)], **config_children(job))
    first = decide(job, {}, children, NOW)
    again = decide(job, first.status, children, NOW + timedelta(seconds=5))
    assert not status_changed(first.status, again.status)


def test_launcher_that_never_reached_a_worker_says_so() -> None:
    job = job_of()
    batch, pod = launcher(job)
    pod["status"]["phase"] = "Failed"
    pod["status"]["containerStatuses"] = [
        {
            "name": "launcher",
            "state": {
                "terminated": {
                    "reason": "Error",
                    "exitCode": 3,
                    "message": "worker cifar-worker-1.cifar.ml.svc did not accept ssh",
                }
            },
        }
    ]
    children = Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.RUNNING}, children, NOW)
    assert plan.status["reason"] == r.WORKERS_UNREACHABLE and plan.status["phase"] == r.RESTARTING
    assert "cifar-worker-1.cifar.ml.svc did not accept ssh" in plan.status["message"]


def test_a_refused_worker_keeps_the_refusal_in_status_until_it_exists() -> None:
    job = job_of()
    message = 'the API server refused Pod cifar-worker-1: exceeded quota: pods. the job waits'
    waiting = {"phase": r.PENDING, "reason": r.QUOTA_EXCEEDED, "message": message}
    one = Children(pods=[worker(job, 0, ready=False)], **config_children(job))
    plan = decide(job, waiting, one, NOW)
    assert created_kinds(plan) == ["Pod"], "the refused worker is tried again"
    assert (plan.status["phase"], plan.status["reason"], plan.status["message"]) == (r.PENDING, r.QUOTA_EXCEEDED,
                                                                                      message)
    created = next(c for c in plan.status["conditions"] if c["type"] == r.COND_CREATED)
    assert (created["status"], created["reason"]) == ("False", r.QUOTA_EXCEEDED)
    assert not status_changed({**waiting, **plan.status}, plan.status), "a retry rewrites nothing"
    both = Children(pods=[worker(job, 0, ready=False), worker(job, 1, ready=False)], **config_children(job))
    cleared = decide(job, {**waiting, **plan.status}, both, NOW)
    assert cleared.status["reason"] == r.WAITING_FOR_WORKERS
    created = next(c for c in cleared.status["conditions"] if c["type"] == r.COND_CREATED)
    assert (created["status"], created["reason"]) == ("True", r.CHILDREN_CREATED)


def test_the_pod_of_a_finished_launcher_is_kept_even_if_the_cache_still_sees_it_running() -> None:
    job = job_of(runPolicy={"cleanPodPolicy": "Running"})
    batch, pod = launcher(job, finished="Complete")
    lagging = {**pod, "status": {"phase": "Running"}}  # the pod's watch has not caught up with the Job's
    children = Children(pods=[worker(job, 0), worker(job, 1), lagging], jobs=[batch], **config_children(job))
    plan = decide(job, {"phase": r.SUCCEEDED, "completionTime": "2026-11-21T12:00:00Z"}, children, NOW)
    assert {a.name for a in plan.actions if isinstance(a, Delete)} == {"cifar-worker-0", "cifar-worker-1"}
