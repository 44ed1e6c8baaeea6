"""Per-job operator latencies from what a namespace watch saw (pure).

An `Observation` is what the watches recorded: when each labelled object was first seen, and when each worker pod was
first seen Ready. A job's children are every object labelled with its name except the launcher Job and the pods that
Job creates; its launcher is the Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

LABEL_JOB = "kubetrain.dev/job-name"
LABEL_ROLE = "kubetrain.dev/role"
WORKER_ROLE = "worker"

Key = tuple[str, str]  # (kind, name)


@dataclass
class Observation:
    """Monotonic seconds at which things were first seen in one namespace."""

    first_seen: dict[Key, float] = field(default_factory=dict)
    labels: dict[Key, Mapping[str, str]] = field(default_factory=dict)
    ready_at: dict[str, float] = field(default_factory=dict)  # worker pod name -> first seen Ready


@dataclass(frozen=True)
class JobLatency:
    name: str
    children: int
    to_children: float  # create -> every child but the launcher exists
    to_launcher: float  # create -> launcher Job exists
    ready_to_launcher: float  # last worker Ready -> launcher Job exists


def owned(observation: Observation, job: str) -> list[Key]:
    return [key for key, labels in observation.labels.items() if labels.get(LABEL_JOB) == job]


def is_launcher_side(key: Key, labels: Mapping[str, str]) -> bool:
    kind, _ = key
    return kind == "Job" or (kind == "Pod" and labels.get(LABEL_ROLE) != WORKER_ROLE)


def job_latency(observation: Observation, job: str, submitted: float) -> JobLatency:
    """Latencies of one job created at `submitted`; raises ValueError naming what was never seen."""
    keys = owned(observation, job)
    children = [k for k in keys if not is_launcher_side(k, observation.labels[k])]
    launchers = [k for k in keys if k[0] == "Job"]
    workers = [k[1] for k in children if k[0] == "Pod"]
    if not children or not launchers or not workers:
        raise ValueError(f"job {job}: watches saw {len(children)} children, {len(workers)} worker pods and "
                         f"{len(launchers)} launcher Jobs; the operator did not finish creating it")
    missing_ready = [w for w in workers if w not in observation.ready_at]
    if missing_ready:
        raise ValueError(f"job {job}: worker pods {missing_ready} were never seen Ready")
    launcher = observation.first_seen[launchers[0]]
    return JobLatency(
        name=job,
        children=len(children),
        to_children=max(observation.first_seen[k] for k in children) - submitted,
        to_launcher=launcher - submitted,
        ready_to_launcher=launcher - max(observation.ready_at[w] for w in workers),
    )
