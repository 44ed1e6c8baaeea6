"""The API server's floor for an operator's children on this machine: the same objects the operator created for one
job, replayed for N jobs by a plain client with no operator running, as fast as it can: the N resources created from
16 threads as in the operator rounds, each job's children queued the moment its resource exists and created by 16
workers (every child but the pods at once, then the pods at once). The time from a job's create until its
last child is seen on the watch is what no operator could beat here with that set of children.

`templates` (pure) turns the children captured after a contender's round into replayable objects; `replay` creates
them in a fresh namespace and returns the per-job latencies.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client, dynamic

from .latency import Convention, Observation, is_launcher_side
from .observer import Observer

KINDS = "pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings"
KEEP_METADATA = ("name", "labels", "annotations", "ownerReferences")
SERVER_SET_SPEC = {"Pod": ("nodeName",), "Service": ("clusterIP", "clusterIPs")}
TEMPLATE_JOB = "warmup"  # the job every round runs first; its children are the templates


@dataclass(frozen=True)
class Template:
    """One child as a client would create it: what the server filled in (status, uid, node, cluster IP) removed."""

    obj: dict[str, Any]

    @property
    def is_pod(self) -> bool:
        return self.obj["kind"] == "Pod"


def templates(listed: list[dict[str, Any]], convention: Convention, job: str = TEMPLATE_JOB) -> list[Template]:
    """The first children of `job` among `listed` (any kinds, as the API returned them), ready to create again."""
    found = []
    for obj in listed:
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        if convention.job_of(labels) != job or is_launcher_side((obj["kind"], meta["name"]), labels, convention):
            continue
        clean = {key: value for key, value in obj.items() if key not in ("status", "metadata")}
        clean["metadata"] = {key: meta[key] for key in KEEP_METADATA if key in meta}
        spec = clean.get("spec")
        for key in SERVER_SET_SPEC.get(obj["kind"], ()):
            if spec is not None and spec.get(key) not in ("None", ["None"]):  # a headless Service stays headless
                spec.pop(key, None)
        if obj["kind"] == "ServiceAccount":
            clean.pop("secrets", None)
        found.append(Template(clean))
    return found


def instantiate(template: Template, old: str, new: str, owner_uid: str) -> dict[str, Any]:
    """The template for job `new`: every mention of the job's name replaced, owned by the new job resource."""
    obj = json.loads(json.dumps(template.obj).replace(old, new))
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("name") == new:
            ref["uid"] = owner_uid
    return obj


def replay(make_client: Callable[[], client.ApiClient], namespace: str, convention: Convention,
           resource: tuple[str, str, str], body: Callable[[str], dict[str, Any]], children: list[Template],
           jobs: int) -> list[float]:
    """Create `jobs` jobs' resources and children in `namespace`; create -> last child seen, per job (seconds)."""
    api = make_client()
    custom, objects = client.CustomObjectsApi(api), dynamic.DynamicClient(api)
    group, version, plural = resource
    observer = Observer(make_client, namespace, convention).start()
    waves = [[t for t in children if not t.is_pod], [t for t in children if t.is_pod]]
    builders = ThreadPoolExecutor(max_workers=16)  # one job's children at a time each, as an operator's workers
    writes = ThreadPoolExecutor(max_workers=64)  # a wave's creates at once
    built: list[Future[None]] = []

    def create(obj: dict[str, Any]) -> None:
        objects.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).create(body=obj, namespace=namespace)

    def build(name: str, uid: str) -> None:
        for wave in waves:
            list(writes.map(create, [instantiate(t, TEMPLATE_JOB, name, uid) for t in wave]))

    def submit(name: str) -> float:
        """Create the job's resource and queue its children at once (an operator would see the resource now)."""
        submitted = time.monotonic()
        owner = custom.create_namespaced_custom_object(group, version, namespace, plural, body(name))
        built.append(builders.submit(build, name, owner["metadata"]["uid"]))  # type: ignore[index]  # a dict
        return submitted

    try:
        names = [f"floor-{index}" for index in range(jobs)]
        with ThreadPoolExecutor(max_workers=min(jobs, 16)) as starters:  # as the operator rounds create jobs
            submitted = dict(zip(names, starters.map(submit, names), strict=True))
        for future in built:
            future.result()
        deadline = time.monotonic() + 60
        while any(count < len(children) for count in _seen(observer, names)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the watch never saw every replayed child of {jobs} jobs in {namespace}")
            time.sleep(0.1)
        with observer.lock:
            return [_last_seen(observer.observation, convention, name) - submitted[name] for name in names]
    finally:
        builders.shutdown()
        writes.shutdown()
        observer.stop()


def _seen(observer: Observer, names: list[str]) -> list[int]:
    """Children seen so far per job of `names` (one pass over what the watches recorded)."""
    with observer.lock:
        jobs = [observer.convention.job_of(labels) for labels in observer.observation.labels.values()]
    counts = Counter(jobs)
    return [counts[name] for name in names]


def _last_seen(observation: Observation, convention: Convention, job: str) -> float:
    return max(at for key, at in observation.first_seen.items()
               if convention.job_of(observation.labels[key]) == job)
