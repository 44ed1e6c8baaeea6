"""Parse and validate a DistributedTraining object into typed, defaulted values.

The CRD schema and its CEL rules reject most bad input at the API server; this module repeats the checks the
operator relies on (so a spec that slipped past an older CRD still fails with a message naming the field) and adds
the ones CEL cannot express. Every default lives here and nowhere else.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.contract import (
    CONTAINER_NAMES,
    ENTRYPOINTS_IMAGE,
    ENV_PREFIX,
    IMAGE_PATHS,
    KIND,
    MPI_IMPLEMENTATIONS,
    RESERVED_MOUNT_PATHS,
)
from kubetrain.failure_policy import ACTIONS, DEFAULT_RULES, ROLES, ExitCodes, Rule
from kubetrain.kueue import PRIORITY_LABEL, QUEUE_LABEL

# Defaults, declared once (the CRD schema carries the same values; tests/reliability/test_spec_drift.py checks both).
DEFAULT_WORKERS = 1
DEFAULT_MIN_WORKERS = 1  # spec.elastic.minWorkers
DEFAULT_DATA_MOUNT = "/data"
DEFAULT_CHECKPOINT_MOUNT = "/checkpoints"
DEFAULT_WAIT_FOR_WORKERS_SECONDS = 300
DEFAULT_MPI_IMPLEMENTATION = "OpenMPI"
# kubetrain/base's user; 0 (root) only when the spec says so.
DEFAULT_RUN_AS_USER = 1000
MAX_UID = 2147483647
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_CLEAN_POD_POLICY = "Running"
CLEAN_POD_POLICIES = ("Running", "All", "None")
MAX_SLOTS_PER_WORKER = 64
MAX_WORKERS = 1000
# Pod hostnames are `<name>-worker-<i>` and must fit a 63-character DNS label with up to 3 digits of index.
MAX_NAME_LENGTH = 63 - len("-worker-") - len(str(MAX_WORKERS - 1))
MAX_COMMAND_ITEMS, MAX_COMMAND_ITEM_LENGTH = 256, 4096
MAX_ENV_ENTRIES, MAX_ENV_NAME_LENGTH, MAX_ENV_VALUE_LENGTH = 128, 256, 65536
MAX_FAILURE_RULES, MAX_EXIT_CODES, MAX_POD_CONDITIONS = 20, 255, 20
# Gang schedulers and the schedulerName each one answers to by default (scheduler-plugins' second-scheduler profile).
GANG_SCHEDULERS = {"Coscheduling": "scheduler-plugins-scheduler", "Volcano": "volcano"}
GANG_TIMEOUT_ACTIONS = ("Wait", "Fail")
DEFAULT_GANG_TIMEOUT_SECONDS = 600
CONDITION_STATUSES = ("True", "False", "Unknown")

# A Docker image reference: [registry[:port]/]path[:tag][@digest] (the CRD's spec.image pattern).
_IMAGE = re.compile(
    r"^(([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?"
    r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*)"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


class SpecError(ValueError):
    """A DistributedTraining spec that cannot run; `field` is the JSON path of the offending field."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


@dataclass(frozen=True)
class Volume:
    claim_name: str | None
    mount_path: str
    read_only: bool


@dataclass(frozen=True)
class Resources:
    gpus_per_worker: int
    cpu: str | None
    memory: str | None


@dataclass(frozen=True)
class RunPolicy:
    backoff_limit: int
    active_deadline_seconds: int | None
    ttl_seconds_after_finished: int | None
    clean_pod_policy: str
    suspend: bool
    pod_failure_policy: tuple[Rule, ...] = DEFAULT_RULES


@dataclass(frozen=True)
class Gang:
    """`spec.scheduling.gang`: the workers are placed all together or not at all, by a gang scheduler."""

    scheduler: str  # one of GANG_SCHEDULERS
    scheduler_name: str  # the pods' spec.schedulerName
    min_available: int
    schedule_timeout_seconds: int
    on_timeout: str  # "Wait" or "Fail"
    queue: str | None = None  # Volcano's queue


@dataclass(frozen=True)
class Elastic:
    """`spec.elastic`: Horovod elastic training. The job runs on any number of Ready workers from min to max; a lost
    worker is replaced while the others go on, and `workers` (kubectl scale) is the number to aim for."""

    min_workers: int
    max_workers: int


@dataclass(frozen=True)
class Scheduling:
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    priority_class_name: str | None
    gang: Gang | None = None


@dataclass(frozen=True)
class JobSpec:
    image: str
    command: tuple[str, ...]
    env: tuple[Mapping[str, Any], ...]
    workers: int
    slots_per_worker: int
    resources: Resources
    data: Volume
    checkpoint: Volume
    wait_for_workers_seconds: int
    run_policy: RunPolicy
    scheduling: Scheduling
    pod_template: Mapping[str, Any]
    image_pull_policy: str | None = None
    mpi_implementation: str = DEFAULT_MPI_IMPLEMENTATION
    launcher_runs_ranks: bool = False  # spec.launcher.runAsWorker
    run_as_user: int = DEFAULT_RUN_AS_USER
    elastic: Elastic | None = None

    @property
    def num_processes(self) -> int:
        return self.rank_hosts * self.slots_per_worker

    @property
    def rank_hosts(self) -> int:
        """Pods that run ranks: the workers, and the launcher with launcher.runAsWorker."""
        return self.workers + (1 if self.launcher_runs_ranks else 0)

    @property
    def workers_to_start(self) -> int:
        """Ready workers the launcher needs to start: every worker, or an elastic job's minWorkers."""
        return self.elastic.min_workers if self.elastic else self.workers


@dataclass(frozen=True)
class Queue:
    """The Kueue LocalQueue a job waits in for quota (its `kueue.x-k8s.io/queue-name` label) and its
    WorkloadPriorityClass (`kueue.x-k8s.io/priority-class`)."""

    name: str
    priority_class: str | None = None


@dataclass(frozen=True)
class Job:
    """One DistributedTraining: identity plus parsed spec."""

    name: str
    namespace: str
    uid: str
    spec: JobSpec
    labels: Mapping[str, str] = field(default_factory=dict)
    queue: Queue | None = None  # Kueue admits the workers as one group
    # Not in the spec: where this installation takes the pods' entrypoints from (the chart's entrypoints.image).
    entrypoints_image: str = ENTRYPOINTS_IMAGE


def parse_job(body: Mapping[str, Any], entrypoints_image: str = ENTRYPOINTS_IMAGE) -> Job:
    """Parse a whole DistributedTraining object (as from the API or a job.yaml) into a Job."""
    if body.get("kind", KIND) != KIND:
        raise SpecError("kind", f"expected {KIND}, got {body.get('kind')!r}")
    metadata = body.get("metadata") or {}
    name = metadata.get("name") or ""
    if not _DNS_LABEL.match(name) or len(name) > MAX_NAME_LENGTH:
        raise SpecError(
            "metadata.name",
            f"must be a lowercase DNS label of at most {MAX_NAME_LENGTH} characters starting with a letter "
            f"(pod hostnames are <name>-worker-<index>); got {name!r}",
        )
    labels = dict(metadata.get("labels") or {})
    spec = parse_spec(body.get("spec"))
    return Job(
        name=name,
        namespace=metadata.get("namespace") or "default",
        uid=metadata.get("uid") or "",
        spec=spec,
        labels=labels,
        queue=_parse_queue(labels, spec),
        entrypoints_image=entrypoints_image,
    )


def _parse_queue(labels: Mapping[str, Any], spec: JobSpec) -> Queue | None:
    """Kueue's labels, checked as Kueue checks them, and against what a Kueue pod group can be."""
    name, priority = labels.get(QUEUE_LABEL), labels.get(PRIORITY_LABEL)
    for key, value in ((QUEUE_LABEL, name), (PRIORITY_LABEL, priority)):
        if value is not None and not (isinstance(value, str) and _DNS_SUBDOMAIN.fullmatch(value)):
            what = "LocalQueue" if key == QUEUE_LABEL else "WorkloadPriorityClass"
            raise SpecError(f"metadata.labels[{key!r}]", f"must name a {what}: lowercase letters, digits, '-' "
                                                         f"and '.', starting and ending with a letter or digit; "
                                                         f"got {value!r}")
    if name is None:
        if priority is not None:
            raise SpecError(f"metadata.labels[{PRIORITY_LABEL!r}]",
                            f"is read by Kueue only: add the {QUEUE_LABEL} label too, or remove this one")
        return None
    where = f"metadata.labels[{QUEUE_LABEL!r}]"
    if spec.elastic is not None:
        raise SpecError(where, "Kueue admits a fixed number of pods and an elastic job changes its number: remove "
                               "spec.elastic or this label")
    if spec.workers == 0:
        raise SpecError(where, "Kueue admits the worker pods, and this job has none (spec.workers: 0): give it at "
                               "least 1 worker or remove this label")
    return Queue(name, priority)


def parse_spec(spec: Any) -> JobSpec:
    """Parse `.spec`, applying defaults; raises SpecError naming the first bad field."""
    spec = _mapping(spec, "spec", required=True)
    image = spec.get("image")
    if not isinstance(image, str) or not image:
        raise SpecError("spec.image", "is required: the container image that holds the training program")
    if len(image) > 1024 or not _IMAGE.fullmatch(image):
        raise SpecError("spec.image", f"{image!r} is not an image reference, e.g. registry.example.com/team/cifar:1.0")
    command = spec.get("command")
    if not isinstance(command, list) or not command or len(command) > MAX_COMMAND_ITEMS:
        raise SpecError("spec.command", f"is required: 1 to {MAX_COMMAND_ITEMS} strings, e.g. [python, -m, mnist]")
    for index, item in enumerate(command):
        if not isinstance(item, str) or not item or len(item) > MAX_COMMAND_ITEM_LENGTH:
            raise SpecError(f"spec.command[{index}]", f"must be a string of 1 to {MAX_COMMAND_ITEM_LENGTH} characters")
    resources = _parse_resources(_mapping(spec.get("resources"), "spec.resources"))
    launcher = _mapping(spec.get("launcher"), "spec.launcher")
    runs_ranks = launcher.get("runAsWorker", False)
    if not isinstance(runs_ranks, bool):
        raise SpecError("spec.launcher.runAsWorker", "must be true or false")
    workers = _integer(spec.get("workers", DEFAULT_WORKERS), "spec.workers", minimum=0, maximum=MAX_WORKERS)
    if workers == 0 and not runs_ranks:
        raise SpecError("spec.workers", "must be at least 1, or 0 with launcher.runAsWorker: true (a one-pod job)")
    default_slots = resources.gpus_per_worker or 1
    slots = _integer(spec.get("slotsPerWorker", default_slots), "spec.slotsPerWorker", 1, MAX_SLOTS_PER_WORKER)
    if resources.gpus_per_worker and slots > resources.gpus_per_worker:
        raise SpecError(
            "spec.slotsPerWorker",
            f"is {slots} but each worker has {resources.gpus_per_worker} GPU(s): each rank needs its own GPU; "
            "lower slotsPerWorker or raise resources.gpusPerWorker",
        )
    data = _parse_volume(spec.get("data"), "spec.data", DEFAULT_DATA_MOUNT, default_read_only=True)
    checkpoint = _parse_volume(spec.get("checkpoint"), "spec.checkpoint", DEFAULT_CHECKPOINT_MOUNT, False)
    if data.mount_path == checkpoint.mount_path:
        raise SpecError("spec.checkpoint.mountPath", f"must differ from spec.data.mountPath ({data.mount_path})")
    elastic = _parse_elastic(spec.get("elastic"), workers)
    wait = _integer(
        launcher.get("waitForWorkersSeconds", DEFAULT_WAIT_FOR_WORKERS_SECONDS),
        "spec.launcher.waitForWorkersSeconds",
        1,
        86400,
    )
    pull_policy = spec.get("imagePullPolicy")
    if pull_policy is not None and pull_policy not in ("Always", "IfNotPresent", "Never"):
        raise SpecError("spec.imagePullPolicy", "must be one of Always, IfNotPresent, Never")
    implementation = _mapping(spec.get("mpi"), "spec.mpi").get("implementation", DEFAULT_MPI_IMPLEMENTATION)
    if implementation not in MPI_IMPLEMENTATIONS:
        raise SpecError("spec.mpi.implementation", f"must be one of {', '.join(MPI_IMPLEMENTATIONS)} (the MPI in the "
                                                   f"image), got {implementation!r}")
    return JobSpec(
        image=image,
        command=tuple(command),
        env=_parse_env(spec.get("env")),
        workers=workers,
        slots_per_worker=slots,
        resources=resources,
        data=data,
        checkpoint=checkpoint,
        wait_for_workers_seconds=wait,
        run_policy=_parse_run_policy(_mapping(spec.get("runPolicy"), "spec.runPolicy")),
        scheduling=_parse_scheduling(_mapping(spec.get("scheduling"), "spec.scheduling"), workers,
                                     elastic.min_workers if elastic else workers),
        pod_template=_parse_pod_template(spec.get("podTemplate")),
        image_pull_policy=pull_policy,
        mpi_implementation=implementation,
        launcher_runs_ranks=runs_ranks,
        run_as_user=_integer(spec.get("runAsUser", DEFAULT_RUN_AS_USER), "spec.runAsUser", 0, MAX_UID),
        elastic=elastic,
    )


def _parse_elastic(raw: Any, workers: int) -> Elastic | None:
    """`spec.elastic`: 1 <= minWorkers <= workers <= maxWorkers."""
    if raw is None:
        return None
    raw = _mapping(raw, "spec.elastic")
    if "maxWorkers" not in raw:
        raise SpecError("spec.elastic.maxWorkers", "is required: the most workers the job may grow to")
    minimum = _integer(raw.get("minWorkers", DEFAULT_MIN_WORKERS), "spec.elastic.minWorkers", 1, MAX_WORKERS)
    maximum = _integer(raw["maxWorkers"], "spec.elastic.maxWorkers", 1, MAX_WORKERS)
    if not minimum <= workers <= maximum:
        raise SpecError("spec.workers", f"is {workers} but an elastic job needs elastic.minWorkers ({minimum}) <= "
                                        f"workers <= elastic.maxWorkers ({maximum})")
    return Elastic(minimum, maximum)


def _parse_resources(raw: Mapping[str, Any]) -> Resources:
    gpus = _integer(raw.get("gpusPerWorker", 0), "spec.resources.gpusPerWorker", 0, 64)
    return Resources(
        gpus_per_worker=gpus,
        cpu=_quantity(raw.get("cpu"), "spec.resources.cpu"),
        memory=_quantity(raw.get("memory"), "spec.resources.memory"),
    )


def _parse_volume(raw: Any, path: str, default_mount: str, default_read_only: bool) -> Volume:
    raw = _mapping(raw, path)
    claim = raw.get("claimName")
    if claim is not None and (not isinstance(claim, str) or len(claim) > 253 or not _DNS_SUBDOMAIN.fullmatch(claim)):
        raise SpecError(f"{path}.claimName", "must be the name of a PersistentVolumeClaim in the job's namespace")
    mount = raw.get("mountPath", default_mount)
    normal = posixpath.normpath(mount) if isinstance(mount, str) else ""
    if not isinstance(mount, str) or not mount.startswith("/") or normal in ("/", "//") or "//" in mount:
        raise SpecError(f"{path}.mountPath", f"must be an absolute path other than /, got {mount!r}")
    if {".", ".."} & set(mount.split("/")):
        raise SpecError(f"{path}.mountPath", f"{mount!r} must not contain . or .. segments; write the path out")
    for needed in IMAGE_PATHS:
        if normal == needed or normal.startswith(needed + "/") or needed.startswith(normal + "/"):
            raise SpecError(
                f"{path}.mountPath",
                f"{mount!r} would hide what the image itself needs ({needed}); choose another path, e.g. /data",
            )
    for reserved in RESERVED_MOUNT_PATHS:
        if normal == reserved or normal.startswith(reserved + "/"):
            raise SpecError(
                f"{path}.mountPath",
                f"{mount!r} is where kubetrain mounts its own files ({reserved}); "
                "choose another path, e.g. /data or /checkpoints",
            )
    read_only = raw.get("readOnly", default_read_only)
    if not isinstance(read_only, bool):
        raise SpecError(f"{path}.readOnly", "must be true or false")
    return Volume(claim_name=claim, mount_path=normal, read_only=read_only)


def _parse_env(raw: Any) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_ENV_ENTRIES:
        raise SpecError("spec.env", f"must be a list of at most {MAX_ENV_ENTRIES} {{name, value}} entries")
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"spec.env[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise SpecError(f"{where}.name", "is required")
        name = entry["name"]
        if not _ENV_NAME.fullmatch(name) or len(name) > MAX_ENV_NAME_LENGTH:
            raise SpecError(f"{where}.name", f"{name!r} is not a valid environment variable name")
        if name.startswith(ENV_PREFIX):
            raise SpecError(
                f"{where}.name", f"{name!r}: names starting with {ENV_PREFIX} are set by kubetrain"
            )
        if name in seen:
            raise SpecError(f"{where}.name", f"{name!r} is listed twice")
        if "value" in entry and not isinstance(entry["value"], str):
            raise SpecError(f"{where}.value", "must be a string (quote numbers in YAML)")
        if len(entry.get("value", "")) > MAX_ENV_VALUE_LENGTH:
            raise SpecError(f"{where}.value", f"must be at most {MAX_ENV_VALUE_LENGTH} characters")
        if "valueFrom" in entry:
            if "value" in entry:
                raise SpecError(f"{where}.valueFrom", "cannot be given together with value: keep one")
            _check_value_from(entry["valueFrom"], f"{where}.valueFrom")
        seen.add(name)
    return tuple(dict(entry) for entry in raw)


def _parse_run_policy(raw: Mapping[str, Any]) -> RunPolicy:
    policy = raw.get("cleanPodPolicy", DEFAULT_CLEAN_POD_POLICY)
    if policy not in CLEAN_POD_POLICIES:
        raise SpecError("spec.runPolicy.cleanPodPolicy", f"must be one of {', '.join(CLEAN_POD_POLICIES)}")
    suspend = raw.get("suspend", False)
    if not isinstance(suspend, bool):
        raise SpecError("spec.runPolicy.suspend", "must be true or false")
    deadline = raw.get("activeDeadlineSeconds")
    ttl = raw.get("ttlSecondsAfterFinished")
    return RunPolicy(
        backoff_limit=_integer(raw.get("backoffLimit", DEFAULT_BACKOFF_LIMIT), "spec.runPolicy.backoffLimit", 0, 100),
        active_deadline_seconds=None
        if deadline is None
        else _integer(deadline, "spec.runPolicy.activeDeadlineSeconds", 1, None),
        ttl_seconds_after_finished=None if ttl is None else _integer(ttl, "spec.runPolicy.ttlSecondsAfterFinished", 0),
        clean_pod_policy=policy,
        suspend=suspend,
        pod_failure_policy=_parse_pod_failure_policy(raw.get("podFailurePolicy")),
    )


def _parse_pod_failure_policy(raw: Any) -> tuple[Rule, ...]:
    """`podFailurePolicy.rules`, in order; absent: the defaults (kubetrain.failure_policy.DEFAULT_RULES)."""
    if raw is None:
        return DEFAULT_RULES
    path = "spec.runPolicy.podFailurePolicy.rules"
    rules = _mapping(raw, "spec.runPolicy.podFailurePolicy").get("rules")
    if not isinstance(rules, list) or len(rules) > MAX_FAILURE_RULES:
        raise SpecError(path, f"must be a list of at most {MAX_FAILURE_RULES} rules")
    return tuple(_parse_failure_rule(_mapping(rule, f"{path}[{i}]"), f"{path}[{i}]") for i, rule in enumerate(rules))


def _parse_failure_rule(raw: Mapping[str, Any], path: str) -> Rule:
    action = raw.get("action")
    if action not in ACTIONS:
        raise SpecError(f"{path}.action", f"must be one of {', '.join(ACTIONS)}, got {action!r}")
    if ("onExitCodes" in raw) == ("onPodConditions" in raw):
        raise SpecError(path, "needs exactly one of onExitCodes and onPodConditions")
    if "onExitCodes" in raw:
        codes = _mapping(raw["onExitCodes"], f"{path}.onExitCodes")
        operator, values, role = codes.get("operator"), codes.get("values"), codes.get("role")
        if operator not in ("In", "NotIn"):
            raise SpecError(f"{path}.onExitCodes.operator", f"must be In or NotIn, got {operator!r}")
        if role is not None and role not in ROLES:
            raise SpecError(f"{path}.onExitCodes.role", f"must be one of {', '.join(ROLES)} (or left out for both)")
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_EXIT_CODES:
            raise SpecError(f"{path}.onExitCodes.values", f"must list 1 to {MAX_EXIT_CODES} exit codes")
        for index, value in enumerate(values):
            _integer(value, f"{path}.onExitCodes.values[{index}]", 0, 255)
        if operator == "In" and 0 in values:
            raise SpecError(f"{path}.onExitCodes.values", "must not contain 0 with operator In (0 is success)")
        return Rule(action, on_exit_codes=ExitCodes(operator, frozenset(values), role))
    conditions = raw["onPodConditions"]
    if not isinstance(conditions, list) or not 1 <= len(conditions) <= MAX_POD_CONDITIONS:
        raise SpecError(f"{path}.onPodConditions", f"must list 1 to {MAX_POD_CONDITIONS} pod conditions")
    pairs = []
    for index, condition in enumerate(conditions):
        where = f"{path}.onPodConditions[{index}]"
        condition = _mapping(condition, where)
        kind, state = condition.get("type"), condition.get("status", "True")
        if not isinstance(kind, str) or not _LABEL_NAME.match(kind):
            raise SpecError(f"{where}.type", f"must be a pod condition type such as DisruptionTarget, got {kind!r}")
        if state not in CONDITION_STATUSES:
            raise SpecError(f"{where}.status", f"must be one of {', '.join(CONDITION_STATUSES)}")
        pairs.append((kind, state))
    return Rule(action, on_pod_conditions=tuple(pairs))


def _parse_scheduling(raw: Mapping[str, Any], workers: int, needed: int) -> Scheduling:
    """`needed`: the workers the job starts with, the gang's default minAvailable."""
    selector = _labels(raw.get("nodeSelector"), "spec.scheduling.nodeSelector")
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
        raise SpecError("spec.scheduling.tolerations", "must be a list of Kubernetes tolerations")
    for index, toleration in enumerate(tolerations):
        _check_toleration(toleration, f"spec.scheduling.tolerations[{index}]")
    priority = raw.get("priorityClassName")
    if priority is not None and (not isinstance(priority, str) or len(priority) > 253
                                 or not _DNS_SUBDOMAIN.fullmatch(priority)):  # fmt: skip
        raise SpecError("spec.scheduling.priorityClassName", "must be the name of a PriorityClass, e.g. high-priority")
    gang = None
    if raw.get("gang") is not None:
        gang = _parse_gang(_mapping(raw["gang"], "spec.scheduling.gang"), workers, needed)
    return Scheduling(dict(selector), tuple(dict(t) for t in tolerations), priority, gang)


def _parse_gang(raw: Mapping[str, Any], workers: int, needed: int) -> Gang:
    path = "spec.scheduling.gang"
    if workers == 0:
        raise SpecError(path, "places worker pods and this job has none (workers: 0); leave the gang out")
    scheduler = raw.get("scheduler")
    if scheduler not in GANG_SCHEDULERS:
        raise SpecError(f"{path}.scheduler", f"must be one of {', '.join(GANG_SCHEDULERS)}, got {scheduler!r}")
    name = raw.get("schedulerName", GANG_SCHEDULERS[scheduler])
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise SpecError(f"{path}.schedulerName", "must be the name of a scheduler profile, e.g. volcano")
    minimum = _integer(raw.get("minAvailable", needed), f"{path}.minAvailable", 1, None)
    if minimum > workers:
        raise SpecError(f"{path}.minAvailable", f"is {minimum} but the job has {workers} workers; lower it or leave "
                                                "it out (default: every worker, or elastic.minWorkers)")
    timeout = _integer(raw.get("scheduleTimeoutSeconds", DEFAULT_GANG_TIMEOUT_SECONDS),
                       f"{path}.scheduleTimeoutSeconds", 1, 86400 * 7)
    on_timeout = raw.get("onTimeout", "Wait")
    if on_timeout not in GANG_TIMEOUT_ACTIONS:
        raise SpecError(f"{path}.onTimeout", f"must be Wait or Fail, got {on_timeout!r}")
    queue = raw.get("queue")
    if queue is not None and (scheduler != "Volcano" or not isinstance(queue, str)
                              or not _DNS_SUBDOMAIN.fullmatch(queue)):  # fmt: skip
        raise SpecError(f"{path}.queue", "is a Volcano queue's name, and only for scheduler Volcano")
    return Gang(scheduler, name, minimum, timeout, on_timeout, queue)


# env valueFrom sources and the keys each one needs (Kubernetes' EnvVarSource)
_VALUE_FROM_SOURCES = {
    "fieldRef": ("fieldPath",),
    "resourceFieldRef": ("resource",),
    "configMapKeyRef": ("name", "key"),
    "secretKeyRef": ("name", "key"),
}
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TOLERATION_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_value_from(raw: Any, path: str) -> None:
    source = _mapping(raw, path)
    if len(source) != 1 or next(iter(source)) not in _VALUE_FROM_SOURCES:
        raise SpecError(path, f"needs exactly one of {', '.join(_VALUE_FROM_SOURCES)}")
    kind, ref = next(iter(source.items()))
    ref = _mapping(ref, f"{path}.{kind}")
    for key in _VALUE_FROM_SOURCES[kind]:
        if not isinstance(ref.get(key), str) or not ref[key]:
            raise SpecError(f"{path}.{kind}.{key}", "is required")


def _check_toleration(toleration: Mapping[str, Any], path: str) -> None:
    operator = toleration.get("operator", "Equal")
    if operator not in _TOLERATION_OPERATORS:
        raise SpecError(f"{path}.operator", f"must be Equal or Exists, got {operator!r}")
    key = toleration.get("key", "")
    if key and not _label_key_ok(key):
        raise SpecError(f"{path}.key", f"{key!r} is not a valid taint key")
    if not key and operator != "Exists":
        raise SpecError(f"{path}.key", "may be empty only with operator Exists")
    value = toleration.get("value", "")
    if operator == "Exists" and value:
        raise SpecError(f"{path}.value", "must be empty when operator is Exists")
    if value and (not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value)):
        raise SpecError(f"{path}.value", f"{value!r} is not a valid taint value")
    effect = toleration.get("effect", "")
    if effect not in _TOLERATION_EFFECTS:
        raise SpecError(f"{path}.effect", "must be NoSchedule, PreferNoSchedule, NoExecute or empty")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (effect != "NoExecute" or isinstance(seconds, bool) or not isinstance(seconds, int)):
        raise SpecError(f"{path}.tolerationSeconds", "is an integer, and only for effect NoExecute")


def _parse_pod_template(raw: Any) -> Mapping[str, Any]:
    template = _mapping(raw, "spec.podTemplate")
    metadata = _mapping(template.get("metadata"), "spec.podTemplate.metadata")
    _labels(metadata.get("labels"), "spec.podTemplate.metadata.labels")
    annotations = _mapping(metadata.get("annotations"), "spec.podTemplate.metadata.annotations")
    for key, value in annotations.items():
        if not _label_key_ok(key) or not isinstance(value, str):
            raise SpecError(
                f"spec.podTemplate.metadata.annotations[{key!r}]",
                "needs a valid key ([prefix/]name) and a string value",
            )
    pod_spec = _mapping(template.get("spec"), "spec.podTemplate.spec")
    for key in ("containers", "initContainers"):
        _check_template_containers(pod_spec.get(key), key)
    return template


def _check_template_containers(raw: Any, key: str) -> None:
    """podTemplate containers merge by name: worker and launcher change kubetrain's own, any other name is added."""
    if raw is None:
        return
    path = f"spec.podTemplate.spec.{key}"
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of containers")
    own = ", ".join(CONTAINER_NAMES)
    for index, entry in enumerate(raw):
        where = f"{path}[{index}]"
        name = _mapping(entry, where).get("name")
        if not isinstance(name, str) or not name:
            raise SpecError(f"{where}.name", f"is required: {own} change kubetrain's container of that name, "
                                             "any other name adds a container of your own")
        if key == "initContainers" and name in CONTAINER_NAMES:
            raise SpecError(f"{where}.name", f"{name!r} is the name of kubetrain's main container; choose another")
        if name not in CONTAINER_NAMES and not entry.get("image"):
            raise SpecError(f"{where}.image", f"is required for your own container {name!r} (only {own} merge "
                                              "into kubetrain's containers)")


def _labels(raw: Any, path: str) -> dict[str, str]:
    """Kubernetes label rules: [prefix/]name keys, values of at most 63 characters of [A-Za-z0-9-_.]."""
    labels = _mapping(raw, path)
    for key, value in labels.items():
        if not _label_key_ok(key):
            raise SpecError(
                f"{path}[{key!r}]",
                "is not a valid label key ([DNS-subdomain prefix/]name, name at most "
                "63 characters of letters, digits, '-', '_' and '.')",
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            raise SpecError(
                f"{path}[{key!r}]",
                f"value {value!r} is not a valid label value (at most 63 characters "
                "of letters, digits, '-', '_' and '.', starting and ending with a letter or digit)",
            )
    return dict(labels)


def _label_key_ok(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _mapping(value: Any, path: str, required: bool = False) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise SpecError(path, "is required")
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be an object, got {type(value).__name__}")
    return value


def _integer(value: Any, path: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise SpecError(path, f"must be {bounds}, got {value}")
    return value


def _quantity(value: Any, path: str) -> str | None:
    if value is None:
        return None
    text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _QUANTITY.match(text):
        raise SpecError(path, f'must be a Kubernetes quantity such as "4", "500m" or "16Gi", got {value!r}')
    return text
