"""A stand-in for kubetrain.kube.Kube at the API's edge: it keeps every write a pass makes, in order, and answers
as the API server would (a create returns the object with a uid; a status patch returns the job with its status; a
pod's log read is its last lines, capped in bytes, or a 404 for a pod it was not given a log of; a list finds the
objects created and those it was told exist)."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Refuse = Callable[[Mapping[str, Any]], Exception | None]


@dataclass
class RecordingKube:
    """Every write as (verb, kind, name), recorded when it returns; `refuse(obj)` returns the error a create of `obj`
    raises, if any; a create of a kind in `slow` takes that many seconds (so writes sent together finish out of
    order)."""

    training: dict[str, Any]
    refuse: Refuse = lambda obj: None
    slow: dict[str, float] = field(default_factory=dict)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    logs: dict[str, bytes] = field(default_factory=dict)  # pod name -> its log; any other pod's cannot be read
    existing: list[dict[str, Any]] = field(default_factory=list)  # what a list finds besides what was created
    _versions: itertools.count = field(default_factory=lambda: itertools.count(100))

    def create(self, obj: Mapping[str, Any], owner_uid: str) -> dict[str, Any]:
        error = self.refuse(obj)
        if error is not None:
            raise error
        time.sleep(self.slow.get(obj["kind"], 0.0))
        self.writes.append(("create", obj["kind"], obj["metadata"]["name"]))
        stored = copy.deepcopy(dict(obj))
        stored["metadata"].update(uid=f"uid-{obj['metadata']['name']}", resourceVersion=str(next(self._versions)))
        self.created.append(stored)
        return stored

    def patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("patch", obj["kind"], obj["metadata"]["name"]))
        stored = copy.deepcopy(dict(obj))  # the patch as if it were the whole object
        stored["metadata"].update(resourceVersion=str(next(self._versions)))
        return stored

    def patch_existing(self, obj: Mapping[str, Any]) -> None:
        self.writes.append(("patch", obj["kind"], obj["metadata"]["name"]))

    def delete(self, api_version: str, kind: str, namespace: str, name: str, uid: str | None = None) -> None:
        self.writes.append(("delete", kind, name))

    def list_metadata(self, api_version: str, kind: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The metadata of the objects of `kind` created or `existing` whose labels equal the selector's."""
        wanted = dict(term.split("=", 1) for term in label_selector.split(","))
        self.writes.append(("list", kind, label_selector))
        return [{"metadata": copy.deepcopy(obj["metadata"])} for obj in [*self.existing, *self.created]
                if obj["kind"] == kind and wanted.items() <= (obj["metadata"].get("labels") or {}).items()]

    def read_log(self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int,
                 seconds: float) -> bytes:
        from kubetrain.kube import LogUnreadable

        self.writes.append(("read log", "Pod", pod))
        if pod not in self.logs:
            raise LogUnreadable(f'404 Not Found: pods "{pod}" not found')
        lines = self.logs[pod].splitlines(keepends=True)[-tail_lines:]
        return b"".join(lines)[:limit_bytes]

    def delete_training(self, namespace: str, name: str) -> None:
        self.writes.append(("delete", self.training["kind"], name))

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("status", self.training["kind"], name))
        self.statuses.append(dict(status))
        body = copy.deepcopy(self.training)
        body["metadata"]["resourceVersion"] = str(next(self._versions))
        return {**body, "status": dict(status)}

    def event(self, training: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        self.writes.append(("event", reason, training["metadata"]["name"]))
        self.events.append((event_type, reason, message))
