"""A DistributedTraining as typed values: the CRD's rules and defaults first (kubetrain.validation: the API server's
own, from the same file), then what only a parser can see (paths after normalisation, the free-form parts: the pod
template, tolerations, env sources, Kueue's labels), then the defaults that depend on other fields."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.contract import CONTAINER_NAMES, ENTRYPOINTS_IMAGE, KIND, TENSORBOARD_CONTAINER
from kubetrain.failure_policy import DEFAULT_RULES, ExitCodes, Rule
from kubetrain.kueue import PRIORITY_LABEL, QUEUE_LABEL
from kubetrain.validation import defaulted, violations

# Gang schedulers and the schedulerName each one answers to by default (scheduler-plugins' second-scheduler profile).
GANG_SCHEDULERS = {"Coscheduling": "scheduler-plugins-scheduler", "Volcano": "volcano"}

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class SpecError(ValueError):
    """A DistributedTraining spec that cannot run; `field` is the JSON path of the offending field."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}" if field_path else message)
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
    pod_failure_policy: tuple[Rule, ...]


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
    image_pull_policy: str | None
    mpi_implementation: str
    launcher_runs_ranks: bool  # spec.launcher.runAsWorker
    run_as_user: int
    elastic: Elastic | None
    checkpoint_resume: str = "Always"  # spec.checkpoint.resume: Always, SameJob or Never
    tensorboard: bool = False  # spec.tensorboard.enabled: a TensorBoard container where rank 0 runs

    @property
    def num_processes(self) -> int:
        return self.rank_hosts * self.slots_per_worker

    @property
    def gpus_per_rank(self) -> int:
        """GPUs each rank holds: its pod's GPUs shared by the pod's ranks (slotsPerWorker <= gpusPerWorker)."""
        return self.resources.gpus_per_worker // self.slots_per_worker

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
    created: str | None = None  # metadata.creationTimestamp (the API server's; none in a job.yaml)


def check(body: Mapping[str, Any]) -> None:
    """The CRD's verdict on `body`, as the API server gives it on create: raises SpecError for the first rule it
    breaks."""
    _check_defaulted(defaulted(body))


def _check_defaulted(full: Mapping[str, Any]) -> None:
    if not (full.get("metadata") or {}).get("name"):
        raise SpecError("metadata.name", "Required value: name or generateName is required")
    found = violations(full)
    if found:
        raise SpecError(found[0].field, found[0].message)


def parse_job(body: Mapping[str, Any], entrypoints_image: str = ENTRYPOINTS_IMAGE, admitted: bool = False) -> Job:
    """Parse a whole DistributedTraining object (as from the API or a job.yaml) into a Job. `admitted`: the body
    comes from the API server, which judged it against the CRD when it stored it, so only the parser's own checks
    run."""
    if body.get("kind", KIND) != KIND:
        raise SpecError("kind", f"expected {KIND}, got {body.get('kind')!r}")
    full = defaulted(body)
    if not admitted:
        _check_defaulted(full)
    metadata = full.get("metadata") or {}
    labels = dict(metadata.get("labels") or {})
    spec = _parse_spec(full["spec"])
    return Job(name=metadata["name"], namespace=metadata.get("namespace") or "default", uid=metadata.get("uid") or "",
               spec=spec, labels=labels, queue=_parse_queue(labels, spec), entrypoints_image=entrypoints_image,
               created=metadata.get("creationTimestamp"))


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


def _parse_spec(spec: Mapping[str, Any]) -> JobSpec:
    """`.spec` with the CRD's defaults applied, into typed values."""
    resources = spec["resources"]
    gpus = resources["gpusPerWorker"]
    workers = spec["workers"]
    elastic = spec.get("elastic")
    data = _volume(spec["data"], read_only=spec["data"]["readOnly"])
    checkpoint = _volume(spec["checkpoint"], read_only=False)
    if data.mount_path == checkpoint.mount_path:
        raise SpecError("spec.checkpoint.mountPath", f"must differ from spec.data.mountPath ({data.mount_path})")
    return JobSpec(
        image=spec["image"],
        command=tuple(spec["command"]),
        env=_parse_env(spec.get("env") or []),
        workers=workers,
        slots_per_worker=spec.get("slotsPerWorker", gpus or 1),
        resources=Resources(gpus, _quantity(resources.get("cpu")), _quantity(resources.get("memory"))),
        data=data,
        checkpoint=checkpoint,
        wait_for_workers_seconds=spec["launcher"]["waitForWorkersSeconds"],
        run_policy=_parse_run_policy(spec["runPolicy"]),
        scheduling=_parse_scheduling(spec["scheduling"], elastic["minWorkers"] if elastic else workers),
        pod_template=_parse_pod_template(spec.get("podTemplate")),
        image_pull_policy=spec.get("imagePullPolicy"),
        mpi_implementation=spec["mpi"]["implementation"],
        launcher_runs_ranks=spec["launcher"]["runAsWorker"],
        run_as_user=spec["runAsUser"],
        elastic=Elastic(elastic["minWorkers"], elastic["maxWorkers"]) if elastic else None,
        checkpoint_resume=spec["checkpoint"]["resume"],
        tensorboard=_parse_tensorboard(spec["tensorboard"], spec.get("podTemplate")),
    )


def _parse_tensorboard(raw: Mapping[str, Any], template: Any) -> bool:
    """spec.tensorboard.enabled; kubetrain's TensorBoard container then takes its name in the rank-0 pod."""
    enabled = bool(raw["enabled"])
    pod_spec = _mapping(_mapping(template, "spec.podTemplate").get("spec"), "spec.podTemplate.spec")
    for key in ("containers", "initContainers"):
        for index, entry in enumerate(pod_spec.get(key) or []):
            if enabled and isinstance(entry, Mapping) and entry.get("name") == TENSORBOARD_CONTAINER:
                raise SpecError(f"spec.podTemplate.spec.{key}[{index}].name",
                                f"{TENSORBOARD_CONTAINER!r} is the name of kubetrain's TensorBoard container "
                                "(spec.tensorboard.enabled: true); choose another")
    return enabled


def _volume(raw: Mapping[str, Any], read_only: bool) -> Volume:
    """A volume; its mount path as the kubelet will use it (/data/ and /data are one directory)."""
    return Volume(claim_name=raw.get("claimName"), mount_path=posixpath.normpath(raw["mountPath"]),
                  read_only=read_only)


def _quantity(value: Any) -> str | None:
    return None if value is None else str(value)


def _parse_env(raw: list[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """The CRD checks names, lengths and one source per valueFrom; a source's own keys are left to it."""
    for index, entry in enumerate(raw):
        if "valueFrom" in entry:
            _check_value_from(entry["valueFrom"], f"spec.env[{index}].valueFrom")
    return tuple(dict(entry) for entry in raw)


def _parse_run_policy(raw: Mapping[str, Any]) -> RunPolicy:
    failure_policy = raw.get("podFailurePolicy")
    return RunPolicy(
        backoff_limit=raw["backoffLimit"],
        active_deadline_seconds=raw.get("activeDeadlineSeconds"),
        ttl_seconds_after_finished=raw.get("ttlSecondsAfterFinished"),
        clean_pod_policy=raw["cleanPodPolicy"],
        suspend=raw["suspend"],
        pod_failure_policy=DEFAULT_RULES if failure_policy is None else tuple(
            _failure_rule(rule) for rule in failure_policy["rules"]),
    )


def _failure_rule(raw: Mapping[str, Any]) -> Rule:
    """One podFailurePolicy rule (the CRD checks its shape: exactly one of onExitCodes and onPodConditions)."""
    codes = raw.get("onExitCodes")
    if codes is not None:
        return Rule(raw["action"], on_exit_codes=ExitCodes(codes["operator"], frozenset(codes["values"]),
                                                           codes.get("role")))
    return Rule(raw["action"], on_pod_conditions=tuple((c["type"], c["status"]) for c in raw["onPodConditions"]))


def _parse_scheduling(raw: Mapping[str, Any], needed: int) -> Scheduling:
    """`needed`: the workers the job starts with, the gang's default minAvailable."""
    selector = _labels(raw.get("nodeSelector"), "spec.scheduling.nodeSelector")
    tolerations = raw.get("tolerations") or []
    for index, toleration in enumerate(tolerations):
        _check_toleration(toleration, f"spec.scheduling.tolerations[{index}]")
    gang = raw.get("gang")
    return Scheduling(dict(selector), tuple(dict(t) for t in tolerations), raw.get("priorityClassName"),
                      None if gang is None else _gang(gang, needed))


def _gang(raw: Mapping[str, Any], needed: int) -> Gang:
    """The defaults that depend on other fields: the scheduler's own name, and every worker the job starts with."""
    queue = raw.get("queue")
    if queue is not None and not _DNS_SUBDOMAIN.fullmatch(queue):
        raise SpecError("spec.scheduling.gang.queue", f"must be a Volcano queue's name, got {queue!r}")
    scheduler = raw["scheduler"]
    return Gang(scheduler, raw.get("schedulerName", GANG_SCHEDULERS[scheduler]), raw.get("minAvailable", needed),
                raw["scheduleTimeoutSeconds"], raw["onTimeout"], queue)


# env valueFrom sources and the keys each one needs (Kubernetes' EnvVarSource)
_VALUE_FROM_SOURCES = {
    "fieldRef": ("fieldPath",),
    "resourceFieldRef": ("resource",),
    "configMapKeyRef": ("name", "key"),
    "secretKeyRef": ("name", "key"),
}


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
    """What the CRD leaves to the pod's validation: the key's grammar and which fields go together."""
    operator = toleration.get("operator", "Equal")
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
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (effect != "NoExecute" or isinstance(seconds, bool) or not isinstance(seconds, int)):
        raise SpecError(f"{path}.tolerationSeconds", "is an integer, and only for effect NoExecute")


# What spec.podTemplate may hold, and its metadata: a pod's namespace, name and owner are kubetrain's.
_TEMPLATE_FIELDS = ("metadata", "spec")
_TEMPLATE_METADATA_FIELDS = ("labels", "annotations")


def _parse_pod_template(raw: Any) -> Mapping[str, Any]:
    """The CRD allows {metadata: {labels, annotations}, spec}; checked here too, for an API server that still has an
    older CRD, which let any field through."""
    template = _mapping(raw, "spec.podTemplate")
    _only(template, _TEMPLATE_FIELDS, "spec.podTemplate")
    metadata = _mapping(template.get("metadata"), "spec.podTemplate.metadata")
    _only(metadata, _TEMPLATE_METADATA_FIELDS, "spec.podTemplate.metadata",
          "kubetrain sets each pod's namespace, name and owner")
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


def _only(value: Mapping[str, Any], allowed: tuple[str, ...], path: str, why: str = "") -> None:
    for key in value:
        if key not in allowed:
            raise SpecError(f"{path}.{key}", f"unknown field: only {' and '.join(allowed)} may be given here"
                                             + (f" ({why})" if why else "") + "; remove it")


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


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be an object, got {type(value).__name__}")
    return value
