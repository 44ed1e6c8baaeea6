"""spec.runPolicy.podFailurePolicy, decision by decision: disruptions restart without counting, the launcher's bad
configuration exit fails at once, user rules on exit codes and pod conditions, the first match wins."""

from __future__ import annotations

from typing import Any

import pytest
from dtr_bodies import training
from test_plan import NOW, config_children, job_of, launcher, worker

from kubetrain import reasons as r
from kubetrain.api import SpecError, parse_job
from kubetrain.failure_policy import COUNT, FAIL_JOB, IGNORE, Cause, decide
from kubetrain.plan import Children
from kubetrain.plan import decide as decide_plan
from kubetrain.pod_state import pod_failure

RUNNING = {"phase": r.RUNNING, "restarts": 0, "attempt": 0}


def disrupted(job: Any, index: int, why: str, node: str = "gpu-node-3") -> dict:
    pod = worker(job, index)
    pod["spec"]["nodeName"] = node
    pod["metadata"]["deletionTimestamp"] = "2026-11-21T11:59:00Z"
    pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": why,
                                        "message": f"{why} says so"})
    return pod


def launcher_exit(job: Any, code: int) -> tuple[dict, dict]:
    batch, pod = launcher(job)
    pod["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "launcher", "state": {"terminated": {"reason": "Error", "exitCode": code}}}]}
    return batch, pod


@pytest.mark.parametrize(("why", "reason"), [("DeletionByPodGC", r.NODE_LOST), ("DeletionByTaintManager", r.NODE_LOST),
                                             ("PreemptionByScheduler", r.PREEMPTED),
                                             ("EvictionByEvictionAPI", r.EVICTED),
                                             ("TerminationByKubelet", r.EVICTED)])
def test_a_disruption_restarts_without_counting_and_names_its_cause(why: str, reason: str) -> None:
    job = job_of(runPolicy={"backoffLimit": 0})
    batch, pod = launcher(job)
    children = Children(pods=[worker(job, 0), disrupted(job, 1, why), pod], jobs=[batch], **config_children(job))
    plan = decide_plan(job, {**RUNNING, "ignoredFailures": 2}, children, NOW)
    assert plan.status["phase"] == r.RESTARTING and plan.status["reason"] == reason
    assert plan.status["restarts"] == 0 and plan.status["attempt"] == 1 and plan.status["ignoredFailures"] == 3
    assert "not counted toward backoffLimit (podFailurePolicy rule 0 (Ignore on pod condition DisruptionTarget=True))" \
        in plan.status["message"]
    assert "cifar-worker-1" in plan.status["message"] and "gpu-node-3" in plan.status["message"]
    if reason == r.NODE_LOST:
        assert "node gpu-node-3 lost" in plan.status["message"]


def test_a_worker_deleted_right_after_its_disruption_mark_still_restarts_without_counting() -> None:
    """The pod GC marks a pod of a deleted node and deletes it at once: the pass finds it gone, with its last state
    (the watch's deletion event) kept aside as departed."""
    job = job_of(runPolicy={"backoffLimit": 0})
    batch, pod = launcher(job)
    gone = disrupted(job, 1, "DeletionByPodGC")
    children = Children(pods=[worker(job, 0), pod], jobs=[batch], departed=[gone], **config_children(job))
    plan = decide_plan(job, RUNNING, children, NOW)
    assert plan.status["reason"] == r.NODE_LOST and "node gpu-node-3 lost" in plan.status["message"]
    assert plan.status["restarts"] == 0 and plan.status["ignoredFailures"] == 1 and plan.status["attempt"] == 1


def test_a_departed_pod_of_an_earlier_attempt_or_unmarked_loss_is_still_a_counted_worker_loss() -> None:
    job = job_of(runPolicy={"backoffLimit": 1})
    batch, pod = launcher(job, attempt=1)
    old = disrupted(job, 1, "DeletionByPodGC")  # attempt 0's worker 1
    children = Children(pods=[worker(job, 0, attempt=1), pod], jobs=[batch], departed=[old], **config_children(job))
    plan = decide_plan(job, {**RUNNING, "attempt": 1}, children, NOW)
    assert plan.status["reason"] == r.WORKER_LOST and plan.status["restarts"] == 1


def test_the_launchers_bad_configuration_exit_fails_at_once_with_restarts_left() -> None:
    job = job_of(runPolicy={"backoffLimit": 3})
    batch, pod = launcher_exit(job, 2)
    plan = decide_plan(job, RUNNING, Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch],
                                              **config_children(job)), NOW)
    assert plan.status["phase"] == r.FAILED and plan.status["reason"] == r.LAUNCHER_FAILED
    assert "exit code 2" in plan.status["message"]
    assert "podFailurePolicy rule 1 (FailJob on launcher exit code In [2])" in plan.status["message"]


def test_other_exit_codes_count_toward_backoff_limit() -> None:
    job = job_of(runPolicy={"backoffLimit": 3})
    batch, pod = launcher_exit(job, 17)
    plan = decide_plan(job, RUNNING, Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch],
                                              **config_children(job)), NOW)
    assert plan.status["phase"] == r.RESTARTING and plan.status["restarts"] == 1
    assert plan.status["message"].startswith("restart 1/3: ")


def test_user_rules_replace_the_defaults_and_the_first_match_wins() -> None:
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"role": "Launcher", "operator": "In", "values": [2, 42]}},
                        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [17]}}]}
    job = job_of(runPolicy={"backoffLimit": 3, "podFailurePolicy": policy})
    for code, phase, restarts in ((42, r.RESTARTING, 0), (2, r.RESTARTING, 0), (17, r.RESTARTING, 1),
                                  (9, r.FAILED, None)):
        batch, pod = launcher_exit(job, code)
        plan = decide_plan(job, RUNNING, Children(pods=[worker(job, 0), worker(job, 1), pod], jobs=[batch],
                                                  **config_children(job)), NOW)
        assert plan.status["phase"] == phase, (code, plan.status)
        if restarts is not None:
            assert plan.status["restarts"] == restarts, (code, plan.status)
    batch, pod = launcher(job)  # no DisruptionTarget rule now: an eviction counts
    children = Children(pods=[worker(job, 0), disrupted(job, 1, "EvictionByEvictionAPI"), pod], jobs=[batch],
                        **config_children(job))
    plan = decide_plan(job, RUNNING, children, NOW)
    assert plan.status["reason"] == r.EVICTED and plan.status["restarts"] == 1


def test_the_pure_decision() -> None:
    rules = parse_job(training(runPolicy={"podFailurePolicy": {"rules": [
        {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"role": "Worker", "operator": "In", "values": [137]}}]}}))
    policy = rules.spec.run_policy.pod_failure_policy
    assert decide(Cause("Worker", 137), policy).action == FAIL_JOB
    assert decide(Cause("Launcher", 137), policy).action == COUNT
    assert decide(Cause("Worker", None, frozenset({("DisruptionTarget", "True")})), policy).action == COUNT
    assert decide(Cause("Worker", 1), ()).action == COUNT
    default = job_of().spec.run_policy.pod_failure_policy
    assert decide(Cause("Worker", None, frozenset({("DisruptionTarget", "True")})), default).action == IGNORE


def test_a_failed_pods_cause_carries_role_exit_code_and_conditions() -> None:
    job = job_of()
    pod = worker(job, 0, phase="Failed", ready=False,
                 containerStatuses=[{"name": "worker", "state": {"terminated": {"exitCode": 3}}}])
    failure = pod_failure(pod, "worker")
    assert failure is not None and failure.cause.role == "Worker" and failure.cause.exit_code == 3
    assert ("Ready", "False") in failure.cause.conditions


@pytest.mark.parametrize(("rule", "field"), [
    ({"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}}, "rules[0].action"),
    ({"action": "Ignore"}, "rules[0]"),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "X"}]},
     "rules[0]"),
    ({"action": "Ignore", "onExitCodes": {"operator": "Has", "values": [1]}}, "rules[0].onExitCodes.operator"),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [0]}}, "rules[0].onExitCodes.values"),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [256]}}, "rules[0].onExitCodes.values[0]"),
    ({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1], "role": "Driver"}},
     "rules[0].onExitCodes.role"),
    ({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Yes"}]},
     "rules[0].onPodConditions[0].status"),
])
def test_bad_rules_name_the_field(rule: dict, field: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_job(training(runPolicy={"podFailurePolicy": {"rules": [rule]}}))
    assert raised.value.field == f"spec.runPolicy.podFailurePolicy.{field}"
