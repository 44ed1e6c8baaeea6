"""What a sync pass reads instead of the API server: a snapshot of one job's world from the watch-fed stores.

The objects come from the watch-fed store (kubetrain.runtime.store), by (namespace, job name), each reduced to what
decisions read (`kept`); no pass runs before every watch has its first complete listing, so none decides on a
half-filled cache. On top of them `Written` keeps what this operator itself just wrote (create and status-patch
responses) until the watch has delivered that version or a newer one, so a pass never acts on a state older than the
operator's own last write (a restart decided twice, a child created twice). Anything else stale is harmless: creates
and deletes are idempotent, and every write that matters is followed by a watch event that triggers a fresh pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubetrain.children import WATCHED_KINDS
from kubetrain.contract import LABEL_JOB
from kubetrain.projection import METADATA, Shape, project

Obj = Mapping[str, Any]
JobKey = tuple[str, str]  # (namespace, job name)
TRAININGS = "trainings"
WORKLOADS = "workloads"  # Kueue's Workloads, by the job whose workers own them (watched with KUBETRAIN_KUEUE only)
WRITTEN_TTL_SECONDS = 120.0
DEPARTED_TTL_SECONDS = 300.0


def resource_version(obj: Obj) -> int:
    """The object's resourceVersion as a number (etcd's revision; -1 if absent or not numeric)."""
    value = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(value) if value.isdigit() else -1


# What the cache keeps of a DistributedTraining: all a pass reads (spec, status, metadata without managedFields and
# kubectl's last-applied copy of the spec).
TRAINING_SHAPE: Shape = {"apiVersion": True, "kind": True, "metadata": METADATA, "spec": True, "status": True}
# Of a Kueue Workload: its metadata (its owners name the job) and status (its spec repeats the pods' templates).
WORKLOAD_SHAPE: Shape = {"metadata": METADATA, "status": True}
SHAPES: dict[str, Shape] = {TRAININGS: TRAINING_SHAPE, WORKLOADS: WORKLOAD_SHAPE,
                            **{child.field: child.shape for child in WATCHED_KINDS}}


def kept(field: str, body: Obj) -> dict[str, Any]:
    """What the cache keeps of an object of `field` (TRAININGS, WORKLOADS or a watched child's field)."""
    return project(SHAPES[field], body)  # type: ignore[no-any-return]


class Written:
    """Objects this operator wrote, until the watch shows that version (thread-safe: syncs run in threads)."""

    def __init__(self, ttl: float = WRITTEN_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str, str], tuple[float, dict[str, Any]]] = {}  # (field, namespace, name)
        self._by_job: dict[tuple[str, str, str], set[str]] = {}  # (field, namespace, job label) -> names

    def remember(self, field: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (field, meta["namespace"], meta["name"])
        with self._lock:
            self._objects[key] = (self._clock(), kept(field, obj))
            job = (meta.get("labels") or {}).get(LABEL_JOB)
            if job:
                self._by_job.setdefault((field, meta["namespace"], job), set()).add(meta["name"])

    def forget(self, field: str, namespace: str, name: str) -> None:
        with self._lock:
            self._drop((field, namespace, name))

    def echo(self, field: str, observed: Obj) -> bool:
        """Whether `observed` (a watch event's object) is exactly the version this operator wrote: its own write
        coming back, which tells a pass nothing it did not already see. The entry is dropped either way once the
        watch has caught up."""
        meta = observed["metadata"]
        key = (field, meta.get("namespace") or "", meta["name"])
        with self._lock:
            entry = self._objects.get(key)
        if entry is None or resource_version(entry[1]) < 0:
            return False
        same = resource_version(entry[1]) == resource_version(observed)
        self._current(key, observed)
        return same

    def newest(self, field: str, observed: Obj) -> Obj:
        """`observed`, or what this operator wrote over it when that is newer."""
        meta = observed["metadata"]
        written = self._current((field, meta["namespace"], meta["name"]), observed)
        return written if written is not None else observed

    def unseen(self, field: str, job: JobKey, seen: set[str]) -> list[dict[str, Any]]:
        """Objects of `field` this operator created for `job` that the watch has not delivered yet."""
        with self._lock:
            names = [name for name in self._by_job.get((field, *job), ()) if name not in seen]
        found = [self._current((field, job[0], name), None) for name in names]
        return [obj for obj in found if obj is not None]

    def _current(self, key: tuple[str, str, str], observed: Obj | None) -> dict[str, Any] | None:
        with self._lock:
            entry = self._objects.get(key)
            if entry is None:
                return None
            written_at, obj = entry
            caught_up = observed is not None and resource_version(observed) >= resource_version(obj)
            if caught_up or self._clock() - written_at > self._ttl:
                self._drop(key)
                return None
            return obj

    def _drop(self, key: tuple[str, str, str]) -> None:
        """Forget `key` (the lock held)."""
        entry = self._objects.pop(key, None)
        job = ((entry[1]["metadata"].get("labels") or {}).get(LABEL_JOB) if entry else None) or ""
        names = self._by_job.get((key[0], key[1], job))
        if names is not None:
            names.discard(key[2])
            if not names:
                del self._by_job[(key[0], key[1], job)]


class Departed:
    """The last state of pods deleted while Kubernetes was taking them away (DisruptionTarget: node lost, preempted,
    evicted), by job, for a while: the pod GC or the taint manager can delete a pod right after marking it, before any
    pass saw the mark, and the pass that finds the pod gone must still say why and not count it (thread-safe)."""

    def __init__(self, ttl: float = DEPARTED_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._pods: dict[JobKey, dict[str, tuple[float, dict[str, Any]]]] = {}

    def remember(self, key: JobKey, pod: Obj) -> None:
        """Keep `pod` (as the watch delivered it: already what the cache keeps) for the time to live."""
        with self._lock:
            self._pods.setdefault(key, {})[pod["metadata"]["name"]] = (self._clock(), dict(pod))

    def forget_job(self, key: JobKey) -> None:
        with self._lock:
            self._pods.pop(key, None)

    def of_job(self, key: JobKey) -> list[dict[str, Any]]:
        """The job's departed pods, dropping those older than the time to live."""
        now = self._clock()
        with self._lock:
            kept = {name: entry for name, entry in self._pods.get(key, {}).items() if now - entry[0] <= self._ttl}
            if kept:
                self._pods[key] = kept
            else:
                self._pods.pop(key, None)
            return [pod for _, pod in kept.values()]


@dataclass(frozen=True)
class Snapshot:
    """One job's world for one pass: its body, the children it owns, grouped by `WATCHED_KINDS` field, and its pods
    that left with a disruption mark (`Departed`)."""

    training: dict[str, Any]
    children: dict[str, list[Obj]]
    departed: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)

    @property
    def key(self) -> JobKey:
        meta = self.training["metadata"]
        return meta["namespace"], meta["name"]


class Listing(Protocol):
    """Where the watched objects are (kubetrain.runtime.store.Store)."""

    def of(self, field: str, job: JobKey) -> list[Obj]: ...


def take_snapshot(key: JobKey, listing: Listing, written: Written, departed: Departed | None = None
                  ) -> Snapshot | None:
    """The job's world, or None when the watch no longer has the job (deleted: its children go with it)."""
    observed = next(iter(listing.of(TRAININGS, key)), None)
    if observed is None:
        return None
    training = dict(written.newest(TRAININGS, observed))
    listed: dict[str, list[Obj]] = {}
    for child in WATCHED_KINDS:
        objects = [written.newest(child.field, obj) for obj in listing.of(child.field, key)]
        objects += written.unseen(child.field, key, {obj["metadata"]["name"] for obj in objects})
        listed[child.field] = objects
    uid = training["metadata"]["uid"]
    children = owned(listed, uid)
    present = {pod["metadata"]["name"] for pod in children["pods"]}
    gone: list[Obj] = [pod for pod in (departed.of_job(key) if departed else [])
                       if pod["metadata"]["name"] not in present and owned_by(pod, {uid})]
    return Snapshot(training, children, gone, listing.of(WORKLOADS, key))


def owned(listed: Mapping[str, list[Obj]], uid: str) -> dict[str, list[Obj]]:
    """The objects owned by the job `uid`; pods may also be owned by its launcher Job (the launcher's pods)."""
    found = {field: [obj for obj in objects if owned_by(obj, {uid})] for field, objects in listed.items()}
    owners = {uid} | {job["metadata"]["uid"] for job in found["jobs"] if job["metadata"].get("uid")}
    found["pods"] = [pod for pod in listed["pods"] if owned_by(pod, owners)]
    return found


def owned_by(obj: Obj, uids: set[str]) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") in uids for ref in refs)
