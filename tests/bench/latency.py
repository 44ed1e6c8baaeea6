"""Per-job operator latencies from what a namespace watch saw (pure).

An `Observation` is what the watches recorded: when each labelled object was first seen, and when each worker pod was
first seen Ready. A job's children are every object labelled with its name except the launcher Job and the pods that
Job creates; its launcher is the Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubetrain.contract import LABEL_JOB, LABEL_ROLE

Key = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class Convention:
    """How an operator labels a job's children: the label keys naming the job (first present wins) and the role."""

    job_keys: tuple[str, ...]
    role_key: str
    worker_role: str = "worker"

    def job_of(self, labels: Mapping[str, str]) -> str | None:
        return next((labels[key] for key in self.job_keys if key in labels), None)

    @property
    def selector(self) -> str | None:
        """A watch label selector that finds every child, if one label is on all of them."""
        return self.job_keys[0] if len(self.job_keys) == 1 else None


KUBETRAIN = Convention((LABEL_JOB,), LABEL_ROLE)
# mpi-operator v0.8.0 labels its pods with the job name and role, its ConfigMap, Service, Secret and Job with app=<job>
MPI_OPERATOR = Convention(("training.kubeflow.org/job-name", "app"), "training.kubeflow.org/job-role")
LABEL_JOB = KUBETRAIN.job_keys[0]


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


def owned(observation: Observation, job: str, convention: Convention = KUBETRAIN) -> list[Key]:
    return [key for key, labels in observation.labels.items() if convention.job_of(labels) == job]


def is_launcher_side(key: Key, labels: Mapping[str, str], convention: Convention = KUBETRAIN) -> bool:
    kind, _ = key
    return kind == "Job" or (kind == "Pod" and labels.get(convention.role_key) != convention.worker_role)


def job_latency(observation: Observation, job: str, submitted: float,
                convention: Convention = KUBETRAIN) -> JobLatency:
    """Latencies of one job created at `submitted`; raises ValueError naming what was never seen."""
    keys = owned(observation, job, convention)
    children = [k for k in keys if not is_launcher_side(k, observation.labels[k], convention)]
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
