"""Kueue's label on a DistributedTraining: bad values named, the workers in one pod group per attempt, the job
Pending with Kueue's words while gated, and an eviction by Kueue restarting it without counting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from dtr_bodies import training
from test_plan import config_children, launcher, worker

from kubetrain import reasons as r
from kubetrain.api import SpecError, parse_job
from kubetrain.kueue import ADMISSION_GATE, group_name
from kubetrain.plan import Children, Create, Delete, decide

NOW = datetime(2026, 11, 24, 12, 0, 0)
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def queued_job(labels: dict[str, str] | None = None, **spec: Any) -> Any:
    body = training(**spec)
    body["metadata"]["labels"] = {QUEUE: "team-a"} if labels is None else labels
    return parse_job(body)


def gate(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as Kueue's webhook leaves it until the group is admitted."""
    pod["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}
    return pod


def workload(job: Any, attempt: int, reserved: dict[str, str] | None = None,
             cluster_queue: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "QuotaReserved", **reserved}] if reserved else []}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue}
    return {"metadata": {"name": group_name(job.name, job.uid, attempt), "namespace": job.namespace},
            "status": status}


@pytest.mark.parametrize(("labels", "field", "words"), [
    ({QUEUE: "Team_A"}, QUEUE, "must name a LocalQueue"),
    ({QUEUE: "team-a", PRIORITY: "High"}, PRIORITY, "must name a WorkloadPriorityClass"),
    ({PRIORITY: "high"}, PRIORITY, f"add the {QUEUE} label too"),
])
def test_bad_kueue_labels_are_refused_naming_the_label(labels: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(SpecError) as refused:
        queued_job(labels)
    assert refused.value.field == f"metadata.labels[{field!r}]" and words in refused.value.message


def test_kueue_cannot_queue_an_elastic_job_or_one_without_workers() -> None:
    with pytest.raises(SpecError, match="remove spec.elastic or this label"):
        queued_job(elastic={"minWorkers": 1, "maxWorkers": 4})
    with pytest.raises(SpecError, match="has none"):
        queued_job(workers=0, launcher={"runAsWorker": True})


def test_each_attempt_puts_every_worker_and_no_launcher_in_its_own_group() -> None:
    job = queued_job({QUEUE: "team-a", PRIORITY: "high"}, workers=3)
    groups = set()
    for attempt in (0, 1):
        pods = [worker(job, index, attempt=attempt) for index in range(3)]
        meta = [(p["metadata"]["labels"], p["metadata"]["annotations"]) for p in pods]
        assert {labels[QUEUE] for labels, _ in meta} == {"team-a"}
        assert {labels[PRIORITY] for labels, _ in meta} == {"high"}
        assert {a["kueue.x-k8s.io/pod-group-total-count"] for _, a in meta} == {"3"}
        assert {a["kueue.x-k8s.io/retriable-in-group"] for _, a in meta} == {"false"}
        groups |= {labels["kueue.x-k8s.io/pod-group-name"] for labels, _ in meta}
    assert len(groups) == 2  # one group per attempt
    batch, _ = launcher(job)
    assert not {QUEUE, "kueue.x-k8s.io/pod-group-name"} & set(batch["spec"]["template"]["metadata"]["labels"])


def test_group_names_fit_a_label_value_and_differ_between_jobs_of_the_same_name() -> None:
    long = "j" * 52
    names = {group_name(long, uid, attempt) for uid in ("uid-1", "uid-2") for attempt in (0, 1234567)}
    assert len(names) == 4 and all(len(name) <= 63 and name.startswith("jjj") for name in names)


def test_gated_workers_mean_pending_waiting_for_quota_with_kueues_words() -> None:
    job = queued_job()
    words = "couldn't assign flavors to pod set a1b2: insufficient unused quota for nvidia.com/gpu in flavor gpu"
    children = Children(pods=[gate(worker(job, 0)), gate(worker(job, 1))],
                        workloads=[workload(job, 0, {"status": "False", "reason": "Pending", "message": words})],
                        **config_children(job))
    plan = decide(job, {"attempt": 0}, children, NOW)
    assert (plan.status["phase"], plan.status["reason"]) == (r.PENDING, r.WAITING_FOR_QUOTA)
    assert "LocalQueue team-a" in plan.status["message"] and words in plan.status["message"]
    admitted = next(c for c in plan.status["conditions"] if c["type"] == r.COND_ADMITTED)
    assert (admitted["status"], admitted["reason"]) == ("False", r.WAITING_FOR_QUOTA)
    assert not [a for a in plan.actions if isinstance(a, Create) and a.obj["kind"] == "Job"]


def test_without_kueues_workload_the_job_still_says_it_waits_for_kueue() -> None:
    job = queued_job()
    children = Children(pods=[gate(worker(job, 0)), gate(worker(job, 1))], **config_children(job))
    plan = decide(job, {"attempt": 0}, children, NOW)
    assert plan.status["reason"] == r.WAITING_FOR_QUOTA and "Workload" in plan.status["message"]


def test_admitted_workers_start_as_usual_and_the_condition_names_the_cluster_queue() -> None:
    job = queued_job()
    children = Children(pods=[worker(job, 0), worker(job, 1)], workloads=[workload(job, 0, cluster_queue="gpus")],
                        **config_children(job))
    plan = decide(job, {"attempt": 0}, children, NOW)
    assert plan.status["phase"] == r.STARTING
    assert [a.obj["kind"] for a in plan.actions if isinstance(a, Create)] == ["Job"]
    admitted = next(c for c in plan.status["conditions"] if c["type"] == r.COND_ADMITTED)
    assert admitted["status"] == "True" and "ClusterQueue gpus" in admitted["message"]


def stopped_by_kueue(pod: dict[str, Any], words: str) -> dict[str, Any]:
    pod["metadata"]["deletionTimestamp"] = "2026-11-24T11:59:58Z"
    pod["status"]["conditions"].append({"type": "TerminationTarget", "status": "True", "reason": "WorkloadEvicted",
                                        "message": words})
    return pod


@pytest.mark.parametrize("with_policy", [False, True])
def test_preemption_by_kueue_restarts_without_counting_whatever_the_failure_policy(with_policy: bool) -> None:
    policy = {"podFailurePolicy": {"rules": [{"action": "Count", "onPodConditions": [{"type": "TerminationTarget"}]}]}}
    job = queued_job(runPolicy=policy if with_policy else {})
    words = "Preempted to accommodate a workload (UID: 42) due to prioritization in the ClusterQueue"
    batch, pod = launcher(job)
    children = Children(pods=[stopped_by_kueue(worker(job, 0), words), worker(job, 1), pod], jobs=[batch],
                        **config_children(job))
    status = {"attempt": 0, "restarts": 1, "phase": r.RUNNING}
    plan = decide(job, status, children, NOW)
    assert (plan.status["phase"], plan.status["reason"]) == (r.RESTARTING, r.PREEMPTED_BY_KUEUE)
    assert plan.status["restarts"] == 1 and plan.status["attempt"] == 1 and "ignoredFailures" not in plan.status
    assert words in plan.status["message"] and "not counted" in plan.status["message"]
    deleted = {(a.kind, a.name) for a in plan.actions if isinstance(a, Delete)}
    assert deleted == {("Pod", "cifar-worker-1"), ("Job", "cifar-launcher")}


def test_a_worker_kueue_stopped_and_already_gone_still_restarts_without_counting() -> None:
    job = queued_job()
    words = "The workload is deactivated"
    gone = stopped_by_kueue(worker(job, 0), words)
    children = Children(pods=[worker(job, 1)], departed=[gone], **config_children(job))
    plan = decide(job, {"attempt": 0, "restarts": 0}, children, NOW)
    assert (plan.status["reason"], plan.status["restarts"]) == (r.EVICTED_BY_KUEUE, 0)
