"""spec.scheduling.gang: the PodGroup of each scheduler, worker pods as its members (not the launcher), the status of
a gang that waits, and onTimeout."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dtr_bodies import training
from kubernetes.utils.quantity import parse_quantity
from test_plan import NOW, config_children, job_of, worker

from kubetrain import reasons as r
from kubetrain.api import SpecError, parse_job
from kubetrain.manifests.gang import release_patch
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod, build_worker_pod_group
from kubetrain.plan import Children, Create, Delete, ReleaseGang, decide
from kubetrain.sync import waves

GANG_SPEC = {"workers": 3, "resources": {"gpusPerWorker": 2, "cpu": "500m", "memory": "16Gi"}}


def gang_job(**gang):
    return job_of(**GANG_SPEC, scheduling={"gang": gang})


def test_defaults_and_the_fields_a_user_gets_wrong():
    gang = gang_job(scheduler="Coscheduling").spec.scheduling.gang
    assert (gang.scheduler_name, gang.min_available, gang.schedule_timeout_seconds, gang.on_timeout) == (
        "scheduler-plugins-scheduler", 3, 600, "Wait")
    assert gang_job(scheduler="Volcano", queue="research").spec.scheduling.gang.scheduler_name == "volcano"
    for bad, field in (({"scheduler": "Kueue"}, "scheduler"), ({"scheduler": "Volcano", "minAvailable": 4},
                                                                 "minAvailable"),
                       ({"scheduler": "Coscheduling", "queue": "research"}, "queue"),
                       ({"scheduler": "Volcano", "onTimeout": "Retry"}, "onTimeout")):
        with pytest.raises(SpecError) as raised:
            parse_job(training(**GANG_SPEC, scheduling={"gang": bad}))
        assert raised.value.field == f"spec.scheduling.gang.{field}"


@pytest.mark.parametrize(("scheduler", "api_version"), [("Coscheduling", "scheduling.x-k8s.io/v1alpha1"),
                                                        ("Volcano", "scheduling.volcano.sh/v1beta1")])
def test_a_new_gang_job_creates_its_pod_group_before_its_workers(scheduler, api_version):
    job = gang_job(scheduler=scheduler, minAvailable=2)
    plan = decide(job, {}, Children(**config_children(job)), NOW)
    ordered = waves(plan.actions)
    wave_of = {a.obj["kind"]: i for i, wave in enumerate(ordered) for a in wave if isinstance(a, Create)}
    assert wave_of["PodGroup"] < wave_of["Pod"]  # an earlier wave: no worker is made if the group is refused
    creates = [a.obj for wave in ordered for a in wave if isinstance(a, Create)]
    kinds = [obj["kind"] for obj in creates]
    assert kinds.count("Pod") == 3
    group = creates[kinds.index("PodGroup")]
    assert group["apiVersion"] == api_version and group["metadata"]["name"] == "cifar-workers"
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["minResources"] == {"nvidia.com/gpu": "4", "cpu": "1", "memory": "34359738368"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "DistributedTraining"
    assert ("scheduleTimeoutSeconds" in group["spec"]) == (scheduler == "Coscheduling")


def test_rank_0s_tensorboard_counts_once_in_what_the_gang_needs():
    """A pod's native sidecars count toward what the scheduler must find for it: TensorBoard's requests are added
    once (it runs beside rank 0 only), and not at all when rank 0 runs on the launcher, which is no member."""
    on_worker = job_of(**GANG_SPEC, scheduling={"gang": {"scheduler": "Coscheduling"}}, tensorboard={"enabled": True})
    group = build_worker_pod_group(on_worker)
    assert group is not None
    sidecar = build_worker_pod(on_worker, 0)["spec"]["initContainers"][-1]["resources"]["requests"]
    needs = {name: parse_quantity(value) for name, value in group["spec"]["minResources"].items()}
    assert needs == {"nvidia.com/gpu": 6, "cpu": parse_quantity("1500m") + parse_quantity(sidecar["cpu"]),
                     "memory": 3 * parse_quantity("16Gi") + parse_quantity(sidecar["memory"])}
    on_launcher = job_of(**GANG_SPEC, scheduling={"gang": {"scheduler": "Coscheduling"}},
                         tensorboard={"enabled": True}, launcher={"runAsWorker": True})
    group = build_worker_pod_group(on_launcher)
    assert group is not None and group["spec"]["minResources"]["cpu"] == "1.5"


def test_workers_join_the_gang_and_the_launcher_does_not():
    for scheduler, where, key in (("Coscheduling", "labels", "scheduling.x-k8s.io/pod-group"),
                                  ("Volcano", "annotations", "scheduling.k8s.io/group-name")):
        job = gang_job(scheduler=scheduler)
        pod = build_worker_pod(job, 1)
        assert pod["metadata"][where][key] == "cifar-workers"
        assert pod["spec"]["schedulerName"] == job.spec.scheduling.gang.scheduler_name
        launcher = build_launcher_job(job, 0)["spec"]["template"]
        assert "schedulerName" not in launcher["spec"] and key not in launcher["metadata"].get(where, {})


def unplaced(job, index, created: timedelta, message="pod group is not ready, 3 Pending, 3 minAvailable"):
    pod = worker(job, index, phase="Pending", ready=False)
    pod["spec"].pop("nodeName", None)
    pod["metadata"]["creationTimestamp"] = (NOW - created).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": message}]
    return pod


def test_a_waiting_gang_says_how_many_workers_wait_and_what_they_need_together():
    job = gang_job(scheduler="Coscheduling")
    children = Children(pods=[unplaced(job, i, timedelta(seconds=30)) for i in range(3)], **config_children(job))
    plan = decide(job, {}, children, NOW)
    assert plan.status["phase"] == r.PENDING and plan.status["reason"] == r.GANG_UNSCHEDULABLE
    assert plan.status["message"].startswith("3/3 workers unplaced; Coscheduling places at least 3 (6 GPUs "
                                             "together) at once or none: pod group is not ready"), plan.status
    assert any(e.reason == r.GANG_UNSCHEDULABLE for e in plan.events)


def test_on_timeout_fail_fails_after_schedule_timeout_and_wait_keeps_waiting():
    failing = gang_job(scheduler="Volcano", scheduleTimeoutSeconds=60, onTimeout="Fail")
    early = decide(failing, {}, Children(pods=[unplaced(failing, i, timedelta(seconds=50)) for i in range(3)],
                                         **config_children(failing)), NOW)
    assert early.status["phase"] == r.PENDING and early.requeue_after is not None and early.requeue_after <= 10.5
    late = decide(failing, {}, Children(pods=[unplaced(failing, i, timedelta(seconds=61)) for i in range(3)],
                                        **config_children(failing)), NOW)
    assert late.status["phase"] == r.FAILED and late.status["reason"] == r.GANG_UNSCHEDULABLE
    assert "after scheduleTimeoutSeconds=60 (onTimeout: Fail)" in late.status["message"]
    waiting = gang_job(scheduler="Volcano", scheduleTimeoutSeconds=60)
    still = decide(waiting, {}, Children(pods=[unplaced(waiting, i, timedelta(hours=2)) for i in range(3)],
                                         **config_children(waiting)), NOW)
    assert still.status["phase"] == r.PENDING and still.status["reason"] == r.GANG_UNSCHEDULABLE


SUCCEEDED = {"phase": r.SUCCEEDED, "completionTime": "2026-11-21T11:59:00Z", "attempt": 0}


def test_a_finished_coscheduling_gang_marks_its_pod_group_once_its_last_worker_is_gone():
    job = gang_job(scheduler="Coscheduling")
    lingering = decide(job, SUCCEEDED, Children(pods=[worker(job, 2)], **config_children(job)), NOW)
    assert not [a for a in lingering.actions if isinstance(a, ReleaseGang)]  # that worker still holds its node
    gone = decide(job, SUCCEEDED, Children(**config_children(job)), NOW)
    assert gone.actions == [ReleaseGang("2026-11-21T11:59:00Z")] and gone.requeue_after is None
    patch = release_patch(job, "2026-11-21T11:59:00Z")
    assert (patch["apiVersion"], patch["kind"], patch["metadata"]["name"]) == (
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", "cifar-workers")
    assert patch["metadata"]["annotations"] == {"kubetrain.dev/workers-gone-since": "2026-11-21T11:59:00Z"}
    assert "spec" not in patch  # only the mark: a merge patch of what the scheduler reads would change the gang


def test_a_suspended_coscheduling_gang_marks_its_pod_group():
    suspended = {"phase": r.SUSPENDED, "conditions": [
        {"type": r.COND_SUSPENDED, "status": "True", "lastTransitionTime": "2026-11-21T11:58:00Z"}]}
    job = job_of(**GANG_SPEC, scheduling={"gang": {"scheduler": "Coscheduling"}}, runPolicy={"suspend": True})
    plan = decide(job, suspended, Children(**config_children(job)), NOW)
    assert [a for a in plan.actions if isinstance(a, ReleaseGang)] == [ReleaseGang("2026-11-21T11:58:00Z")]


def test_a_finished_volcano_gang_deletes_its_pod_group_once_its_last_worker_is_gone():
    job = gang_job(scheduler="Volcano")  # else Volcano queues the empty group again and keeps 6 GPUs for it
    assert decide(job, SUCCEEDED, Children(pods=[worker(job, 0)], **config_children(job)), NOW).actions == [
        Delete("v1", "Pod", "cifar-worker-0")]  # cleanPodPolicy Running; the group waits for the pod to go
    gone = decide(job, SUCCEEDED, Children(**config_children(job)), NOW)
    assert gone.actions == [Delete("scheduling.volcano.sh/v1beta1", "PodGroup", "cifar-workers")]
    assert gone.requeue_after is None  # the next pass deletes it again if need be (a 404 is nothing to do)
