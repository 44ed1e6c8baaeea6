"""Decide, without I/O, what to do with one DistributedTraining given its children: the level-triggered core.

`decide(job, status, children, now)` observes the world once (plan.world), then a short state machine picks the
state and asks plan.desired for the children to create or delete and plan.phase for what the status says;
plan.attempt_logs adds the copies of launcher output that the plan's deletions would lose. Running it
twice on the same world yields the same plan; kubetrain.sync applies it, so the operator converges from any state,
including after a restart mid-way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from kubetrain import failure_policy
from kubetrain import reasons as r
from kubetrain.api import Job
from kubetrain.contract import launcher_name
from kubetrain.plan import attempt_logs, desired, elastic, phase
from kubetrain.plan.model import (
    SAFETY_REQUEUE_SECONDS,
    WAIT_REQUEUE_SECONDS,
    Action,
    Children,
    Create,
    CreateSshSecret,
    Delete,
    DeleteTraining,
    Event,
    Patch,
    Plan,
    ReleaseGang,
    SaveLog,
    delete_of,
    parse_time,
)
from kubetrain.plan.phase import status_changed
from kubetrain.plan.world import World, observe
from kubetrain.pod_state import Failure, is_terminating, iso, job_finished

__all__ = ["Action", "Children", "Create", "CreateSshSecret", "Delete", "DeleteTraining", "Event",
           "Patch", "Plan", "ReleaseGang", "SaveLog", "decide", "status_changed"]


def decide(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> Plan:
    """The whole reconcile decision for one job."""
    world = observe(job, status, children, now)
    plan = _decide(world)
    plan.actions.extend(attempt_logs.saves(world, plan))
    if world.unreadable:
        _replace_unreadable(world, plan)
    return plan


def _decide(world: World) -> Plan:
    job, status, now = world.job, world.status, world.now
    if status.get("phase") in r.TERMINAL_PHASES:
        return _finished(world, status)
    if job.spec.run_policy.suspend:
        return _suspended(world)
    deadline = job.spec.run_policy.active_deadline_seconds
    if deadline is not None and now >= world.started + timedelta(seconds=deadline):
        return _fail(world, Failure(r.DEADLINE_EXCEEDED, f"the job ran longer than activeDeadlineSeconds={deadline}"))
    evicted = phase.kueue_eviction(world)
    if evicted is not None:
        return _requeue(world, evicted)
    failure = phase.current_failure(world)
    if failure is None and job.spec.elastic is not None:
        for lost in elastic.departing(world).values():  # replaced, unless a podFailurePolicy rule fails the job
            verdict = failure_policy.decide(lost.cause, job.spec.run_policy.pod_failure_policy)
            if verdict.action == failure_policy.FAIL_JOB:
                return _fail(world, replace(lost, message=f"{lost.message} ({verdict.rule})"))
        too_few = elastic.too_few_for(world)
        if too_few is not None and too_few >= job.spec.wait_for_workers_seconds:
            failure = elastic.too_few_failure(world)
    if failure is not None:
        verdict = failure_policy.decide(failure.cause, job.spec.run_policy.pod_failure_policy)
        if verdict.action == failure_policy.FAIL_JOB:
            return _fail(world, replace(failure, message=f"{failure.message} ({verdict.rule})"))
        if verdict.action == failure_policy.IGNORE:
            return _restart(world, failure, ignored_by=verdict.rule)
        limit = job.spec.run_policy.backoff_limit
        if world.restarts < limit:
            return _restart(world, failure)
        reached = f"{failure.message} (backoffLimit {limit} reached after {world.restarts} restarts)"
        return _fail(world, replace(failure, message=reached))
    if job_finished(world.launcher) == "Complete":
        return _succeed(world)
    gang_left = _gang_wait(world)
    if gang_left is not None and gang_left <= 0:
        return _fail(world, _gang_overdue(world))
    return _run(world, gang_left)


def _replace_unreadable(world: World, plan: Plan) -> None:
    """Status times the operator cannot read were decided without (as if absent). It writes its own in their place
    and says so in one Warning event: the next pass reads what it wrote."""
    said = ", ".join(f"{field} {value!r}" for field, value in world.unreadable.items())
    plan.events.append(Event("Warning", r.STATUS_UNREADABLE, f"ignored {said}: not an RFC 3339 time; the operator "
                                                             "writes its own in its place"))
    fields, moment = world.unreadable.keys(), iso(world.now)
    if "status.startTime" in fields and "startTime" not in plan.status:
        plan.status["startTime"] = iso(world.started)
    if "status.completionTime" in fields and "completionTime" not in plan.status:
        plan.status["completionTime"] = moment
    if any(field.startswith("status.conditions") for field in fields) and "conditions" not in plan.status:
        plan.status["conditions"] = [{**condition, "lastTransitionTime": condition.get("lastTransitionTime", moment)}
                                     for condition in world.status.get("conditions") or []]


def _gang_wait(world: World) -> float | None:
    """Seconds left before a gang whose workers are not all placed reaches its scheduleTimeoutSeconds (onTimeout
    Fail only); None when nothing waits on that."""
    gang = world.job.spec.scheduling.gang
    unplaced = phase.unplaced_workers(world)
    if gang is None or gang.on_timeout != "Fail" or not unplaced:
        return None
    created = [parse_time(pod["metadata"].get("creationTimestamp")) for pod in world.live_workers.values()]
    first = min((moment for moment in created if moment is not None), default=world.now)
    return (first + timedelta(seconds=gang.schedule_timeout_seconds) - world.now).total_seconds()


def _gang_overdue(world: World) -> Failure:
    """The failure of a gang whose scheduleTimeoutSeconds has passed with workers unplaced (onTimeout Fail)."""
    gang = world.job.spec.scheduling.gang
    assert gang is not None
    return Failure(r.GANG_UNSCHEDULABLE, f"{len(phase.unplaced_workers(world))}/{world.job.spec.workers} workers were "
                   f"still unplaced after scheduleTimeoutSeconds={gang.schedule_timeout_seconds} (onTimeout: Fail); "
                   f"{gang.scheduler} could not place {gang.min_available} together")


def _run(world: World, gang_left: float | None = None) -> Plan:
    """Create what is missing and say how the job runs; `gang_left`: seconds until the gang's timeout (see
    `_gang_wait`), when to look again."""
    plan = Plan(actions=[*desired.config_actions(world.job, world.children), *desired.ready_endpoints_actions(world)])
    attempt, waiting = desired.attempt_actions(world)
    plan.actions.extend(attempt)
    phase.running(world, plan)
    deadline = world.job.spec.run_policy.active_deadline_seconds
    if deadline is not None:
        remaining = (world.started + timedelta(seconds=deadline) - world.now).total_seconds()
        plan.requeue_after = max(remaining, 0.5)
    if waiting:
        plan.requeue_after = min(plan.requeue_after or WAIT_REQUEUE_SECONDS, WAIT_REQUEUE_SECONDS)
    if gang_left is not None:  # look again when the gang's time is up
        plan.requeue_after = min(plan.requeue_after or gang_left, max(gang_left, 0.5))
    too_few = elastic.too_few_for(world)
    if too_few is not None:  # look again when fewer than minWorkers have been Ready for too long
        left = world.job.spec.wait_for_workers_seconds - too_few
        plan.requeue_after = min(plan.requeue_after or left, max(left, 0.5))
    plan.requeue_after = min(plan.requeue_after or SAFETY_REQUEUE_SECONDS, SAFETY_REQUEUE_SECONDS)
    return plan


def _restart(world: World, failure: Failure, ignored_by: str | None = None) -> Plan:
    """Tear the whole attempt down; the next syncs bring up attempt+1 (resuming from the latest checkpoint).
    `ignored_by`: the podFailurePolicy rule under which this restart does not count toward backoffLimit."""
    plan = Plan(actions=desired.delete_attempt(world.job, world.children), requeue_after=WAIT_REQUEUE_SECONDS)
    phase.restarting(world, failure, plan, ignored_by)
    return plan


def _requeue(world: World, stop: Failure) -> Plan:
    """Kueue evicted the attempt: tear it down like a restart, counting nothing; the next one queues again."""
    plan = Plan(actions=desired.delete_attempt(world.job, world.children), requeue_after=WAIT_REQUEUE_SECONDS)
    phase.requeued(world, stop, plan)
    return plan


def _fail(world: World, failure: Failure) -> Plan:
    plan = Plan()
    launcher = world.children.named(world.children.jobs, launcher_name(world.job.name))
    if launcher is not None and job_finished(launcher) is None and not is_terminating(launcher):
        plan.actions.append(delete_of("batch/v1", "Job", launcher))  # stop the training
    phase.failed(world, failure, plan)
    return _then_finished(world, plan)


def _succeed(world: World) -> Plan:
    plan = Plan()
    phase.succeeded(world, plan)
    return _then_finished(world, plan)


def _then_finished(world: World, plan: Plan) -> Plan:
    finished = _finished(world, plan.status)
    plan.actions.extend(a for a in finished.actions if a not in plan.actions)
    plan.requeue_after = finished.requeue_after
    return plan


def _finished(world: World, status: Mapping[str, Any]) -> Plan:
    """Terminal: apply cleanPodPolicy (idempotently) and the TTL."""
    plan = Plan(actions=desired.clean_pods(world.job, world.children))
    remaining = desired.ttl_remaining(world, status.get("completionTime"))
    if remaining is not None and remaining <= 0:
        plan.actions.append(DeleteTraining())
        ttl = world.job.spec.run_policy.ttl_seconds_after_finished
        plan.events.append(Event("Normal", r.TTL_EXPIRED, f"ttlSecondsAfterFinished={ttl} elapsed"))
    elif remaining is not None:
        plan.requeue_after = remaining
    if plan.actions and plan.requeue_after is None:
        plan.requeue_after = WAIT_REQUEUE_SECONDS
    plan.actions.extend(desired.release_gang(world.job, world.children, status.get("completionTime")))
    return plan


def _suspended(world: World) -> Plan:
    plan = Plan(actions=desired.delete_attempt(world.job, world.children))
    phase.suspended(world, plan)
    if plan.actions:
        plan.requeue_after = WAIT_REQUEUE_SECONDS
    plan.actions.extend(desired.release_gang(world.job, world.children, phase.suspended_since(world.status)))
    return plan
