"""kill -9 of the operator at random points while 20 jobs are created, run and finish (kwok plays the pods): no child
is ever made twice or left without its owner, and every job ends in the phase its launchers' outcomes call for. Pods
are counted as the API server announces them, so one deleted and made again between two snapshots counts twice.

The random seed is printed; set KUBETRAIN_FAULT_SEED to replay a run, KUBETRAIN_KILL_JOBS=200 for a bigger storm.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field

import pytest

from kubetrain.contract import LABEL_ATTEMPT, LABEL_JOB, LABEL_ROLE, ROLE_LAUNCHER
from tests.reliability.fault_harness import (
    ChildLedger,
    MeteredOperator,
    PodsMade,
    expected_children,
    is_live_pod,
    snapshot,
)
from tests.reliability.figures import FIGURES
from tests.support.cluster import ControlPlane
from tests.support.job_events import job_events
from tests.support.operator_harness import create, training

pytestmark = pytest.mark.controlplane

JOBS = int(os.environ.get("KUBETRAIN_KILL_JOBS", "20"))
DEADLINE_SECONDS = 300.0 + 6.0 * JOBS
MIN_KILLS, MAX_KILLS = 8, 14
CONFIG_KINDS = ("Secret", "ConfigMap", "Service")


@dataclass
class Script:
    """What the test does to one job's launchers, and what the job must end as."""

    name: str
    outcomes: list[str]  # the phase given to the launcher pod of attempt 0, 1, ...
    backoff_limit: int
    phase: str
    restarts: int
    given: set[str] = field(default_factory=set)  # launcher pod uids already given an outcome


def scripts() -> list[Script]:
    kinds = [(["Succeeded"], 0, "Succeeded", 0), (["Succeeded"], 2, "Succeeded", 0),
             (["Failed"], 0, "Failed", 0), (["Failed", "Succeeded"], 1, "Succeeded", 1)]
    return [Script(f"storm-{i:02d}", *kinds[i % len(kinds)]) for i in range(JOBS)]


def drive_launchers(plane: ControlPlane, namespace: str, items: list[dict], jobs: dict[str, Script]) -> None:
    """Give every running launcher pod the outcome its job's script says for that attempt."""
    for pod in items:
        labels = pod["metadata"].get("labels") or {}
        if pod["kind"] != "Pod" or labels.get(LABEL_ROLE) != ROLE_LAUNCHER or not is_live_pod(pod):
            continue
        script = jobs[labels[LABEL_JOB]]
        attempt = int(labels.get(LABEL_ATTEMPT, "0"))
        if pod["status"].get("phase") != "Running" or pod["metadata"]["uid"] in script.given:
            continue
        outcome = script.outcomes[min(attempt, len(script.outcomes) - 1)]
        plane.set_pod_outcome(namespace, pod["metadata"]["name"], outcome,
                              exit_code=0 if outcome == "Succeeded" else 1)
        script.given.add(pod["metadata"]["uid"])


def test_operator_killed_at_random_points_leaves_exactly_one_set_of_children(
        crd: ControlPlane, namespace: str) -> None:
    seed = int(os.environ.get("KUBETRAIN_FAULT_SEED", random.randrange(1 << 30)))
    print(f"KUBETRAIN_FAULT_SEED={seed}")
    rng = random.Random(seed)
    jobs = {script.name: script for script in scripts()}
    pending = list(jobs.values())
    ledger = ChildLedger()
    made = PodsMade(crd, namespace).start()
    operator = MeteredOperator(crd, namespace).start()
    kills, snapshots = 0, 0
    next_kill = time.monotonic() + rng.uniform(1.0, 4.0)
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while True:
            assert time.monotonic() < deadline, f"jobs not finished after {DEADLINE_SECONDS:.0f}s:\n" + "\n".join(
                f"{s.name}: {s.outcomes} given {len(s.given)}" for s in jobs.values())
            batch = pending[:rng.randint(1, 3)]
            for script in batch:
                create(crd, namespace, training(script.name, resources={"gpusPerWorker": 0},
                                                runPolicy={"backoffLimit": script.backoff_limit}))
                pending.remove(script)
            items = snapshot(crd, namespace)
            snapshots += 1
            duplicates, orphans = ledger.observe(items, made.drain())
            assert not duplicates and not orphans, (duplicates, orphans, operator.log_tail())
            drive_launchers(crd, namespace, items, jobs)
            phases = {o["metadata"]["name"]: (o.get("status") or {}).get("phase") for o in items
                      if o["kind"] == "DistributedTraining"}
            finished = not pending and all(phases.get(name) in ("Succeeded", "Failed") for name in jobs)
            if (time.monotonic() >= next_kill and kills < MAX_KILLS) or (finished and kills < MIN_KILLS):
                operator.kill()
                kills += 1
                after_kill = snapshot(crd, namespace)  # the world the next operator finds
                duplicates, orphans = ledger.observe(after_kill, made.drain())
                FIGURES.fault(f"operator SIGKILL ({JOBS} jobs in flight)", not duplicates and not orphans,
                              f"kill {kills}: {duplicates + orphans}")
                operator.start()
                operator.wait_serving()
                next_kill = time.monotonic() + rng.uniform(2.0, 7.0)
                continue
            if finished:
                break
            time.sleep(0.3)

        # at rest: exactly the children a finished job keeps, and the phases the scripts call for
        time.sleep(5.0)
        items = snapshot(crd, namespace)
        duplicates, orphans = ledger.observe(items, made.drain())
        trainings = {o["metadata"]["name"]: o for o in items if o["kind"] == "DistributedTraining"}
        problems = []
        for name, script in jobs.items():
            status = trainings[name].get("status") or {}
            if (status.get("phase"), status.get("restarts", 0)) != (script.phase, script.restarts):
                problems.append(f"{name}: {status.get('phase')} after {status.get('restarts')} restarts, expected "
                                f"{script.phase} after {script.restarts} ({status.get('message')})")
            counts = expected_children(trainings[name], items)
            extra = {k: v for k, v in counts.items() if k in CONFIG_KINDS and v != 1}
            missing = [k for k in CONFIG_KINDS if k not in counts]
            if extra or missing or counts.get("worker pods live") or counts.get("launcher pods live"):
                problems.append(f"{name}: children {counts}")
            if script.phase == "Succeeded" and (counts.get("Job") != 1 or counts.get("launcher pods Succeeded") != 1):
                problems.append(f"{name}: the finished launcher and its pod are not kept: {counts}")
        if problems:  # what each operator decided for the failed jobs, and when
            events = json.loads(crd.kubectl("get", "events", "--namespace", namespace, "--output=json"))["items"]
            problems += [job_events(events, failed) for failed in sorted({p.split(":")[0] for p in problems})]
        assert not problems, "\n".join(problems)
        assert not duplicates and not orphans, (duplicates, orphans)
        assert not ledger.pending_orphans(), "children without their owner at rest"
        assert operator.alive()
    finally:
        FIGURES.count("duplicate children", len(ledger.duplicates))
        FIGURES.count("orphaned children", len(ledger.orphans))
        operator.stop()
        made.stop()
        print(f"{kills} kills, {snapshots} snapshots; operator log {operator.log_path}")
