"""The watched objects of each kind, as kept (projected), by the jobs they belong to. Changed on the event loop only;
a sync pass reads it there too, before its thread starts (kubetrain.cache.take_snapshot)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]
JobKey = tuple[str, str]  # (namespace, job name)
ObjKey = tuple[str, str]  # (namespace, object name)


def object_key(obj: Obj) -> ObjKey:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Store:
    """For each field (TRAININGS, a child kind's field, WORKLOADS): each object and the jobs `jobs_of[field]` says
    it belongs to. Every change returns the jobs it touched, before and after."""

    def __init__(self, jobs_of: Mapping[str, Callable[[Obj], Iterable[JobKey]]]) -> None:
        self._jobs_of = jobs_of
        self._objects: dict[str, dict[ObjKey, tuple[Obj, frozenset[JobKey]]]] = {field: {} for field in jobs_of}
        self._by_job: dict[str, dict[JobKey, dict[ObjKey, Obj]]] = {field: {} for field in jobs_of}

    def of(self, field: str, job: JobKey) -> list[Obj]:
        """The objects of `field` that belong to `job` (none for a field not watched)."""
        return list(self._by_job.get(field, {}).get(job, {}).values())

    def jobs_of(self, field: str, obj: Obj) -> set[JobKey]:
        """The jobs an object of `field` belongs to (stored or not)."""
        return set(self._jobs_of[field](obj))

    def jobs(self, field: str) -> list[JobKey]:
        """Every job with at least one object of `field` (for TRAININGS: every job)."""
        return list(self._by_job[field])

    def put(self, field: str, obj: Obj) -> set[JobKey]:
        """Store `obj`; the jobs it touched. None when only its resourceVersion changed: the store keeps what
        decisions read (kubetrain.cache.kept), so no pass would see a difference."""
        key = object_key(obj)
        old = self._objects[field].get(key)
        jobs = frozenset(self.jobs_of(field, obj))
        if old is not None:
            self._unlink(field, key, old[1] - jobs)
        self._objects[field][key] = (obj, jobs)
        for job in jobs:
            self._by_job[field].setdefault(job, {})[key] = obj
        if old is not None and old[1] == jobs and _unversioned(old[0]) == _unversioned(obj):
            return set()
        return set(jobs | (old[1] if old else frozenset()))

    def remove(self, field: str, obj: Obj) -> set[JobKey]:
        key = object_key(obj)
        old = self._objects[field].pop(key, None)
        if old is None:
            return set()
        self._unlink(field, key, old[1])
        return set(old[1])

    def replace(self, field: str, objects: Iterable[Obj]) -> tuple[set[JobKey], list[Obj]]:
        """A new complete listing of `field`: the jobs whose objects changed, and the objects no longer there."""
        listed = {object_key(obj): obj for obj in objects}
        gone = [entry[0] for key, entry in self._objects[field].items() if key not in listed]
        touched: set[JobKey] = set()
        for obj in gone:
            touched |= self.remove(field, obj)
        for key, obj in listed.items():
            old = self._objects[field].get(key)
            if old is None or _version(old[0]) != _version(obj):
                touched |= self.put(field, obj)
        return touched, gone

    def _unlink(self, field: str, key: ObjKey, jobs: Iterable[JobKey]) -> None:
        for job in jobs:
            members = self._by_job[field].get(job)
            if members is not None:
                members.pop(key, None)
                if not members:
                    del self._by_job[field][job]


def _unversioned(obj: Obj) -> Obj:
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": None}}


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
