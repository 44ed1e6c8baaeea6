"""Watch one namespace and record, as they happen, what `latency.Observation` holds.

One thread per child kind streams watch events (raw dicts); each object's first sighting and each worker pod's first
Ready are stamped with `time.monotonic()` on arrival.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from .latency import KUBETRAIN, Convention, Observation

WATCH_SECONDS = 60


def _listers(api: client.ApiClient) -> dict[str, Callable[..., Any]]:
    core, rbac, batch = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api), client.BatchV1Api(api)
    return {
        "Pod": core.list_namespaced_pod,
        "Service": core.list_namespaced_service,
        "ConfigMap": core.list_namespaced_config_map,
        "Secret": core.list_namespaced_secret,
        "ServiceAccount": core.list_namespaced_service_account,
        "Role": rbac.list_namespaced_role,
        "RoleBinding": rbac.list_namespaced_role_binding,
        "Job": batch.list_namespaced_job,
    }


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class Observer:
    """Records one namespace's children until `stop()`; read `observation` under `lock`."""

    def __init__(self, make_client: Callable[[], client.ApiClient], namespace: str,
                 convention: Convention = KUBETRAIN) -> None:
        self.namespace = namespace
        self.convention = convention
        self.observation = Observation()
        self.lock = threading.Lock()
        self._make_client = make_client
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Observer:
        for kind in _listers(self._make_client()):
            thread = threading.Thread(target=self._watch, args=(kind,), name=f"watch-{kind}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop recording; the threads end when their current watch request times out (they are daemons)."""
        self._stopped.set()

    def _watch(self, kind: str) -> None:
        lister = _listers(self._make_client())[kind]
        version = None
        while not self._stopped.is_set():
            try:
                stream = watch.Watch().stream(lister, self.namespace, label_selector=self.convention.selector,
                                              deserialize=False, timeout_seconds=WATCH_SECONDS,
                                              resource_version=version)
                for event in stream:
                    now = time.monotonic()
                    obj = event["object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    if not self._stopped.is_set() and event["type"] in ("ADDED", "MODIFIED"):
                        self._record(kind, obj, now)
            except (ApiException, KeyError, urllib3.exceptions.HTTPError):
                # An ERROR event (e.g. 410 Gone: our resourceVersion expired; the raw-dict stream fails on it with
                # KeyError) or a dropped connection: watch again from a fresh list. First sightings are kept, so
                # re-listed objects are no news.
                version = None
                self._stopped.wait(0.2)

    def _record(self, kind: str, obj: dict[str, Any], now: float) -> None:
        meta = obj["metadata"]
        if self.convention.job_of(meta.get("labels") or {}) is None:
            return
        key = (kind, meta["name"])
        with self.lock:
            self.observation.first_seen.setdefault(key, now)
            self.observation.labels.setdefault(key, dict(meta.get("labels") or {}))
            if kind == "Pod" and _ready(obj):
                self.observation.ready_at.setdefault(meta["name"], now)

    def launched(self, names: list[str]) -> set[str]:
        """The trainings among `names` whose launcher Job has been seen."""
        with self.lock:
            return {self.convention.job_of(labels) or "" for (kind, _), labels in self.observation.labels.items()
                    if kind == "Job"} & set(names)
