"""What the reliability tests share: an operator with its metrics endpoint, an API server restart, one-call snapshots
of a namespace's kubetrain objects, and the duplicate/orphan accounting over them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes import config as kube_config

from kubetrain.children import WATCHED_KINDS
from kubetrain.contract import LABEL_ATTEMPT, LABEL_JOB, LABEL_ROLE, ROLE_ATTEMPT_LOG
from kubetrain.manifests.service import MANAGED_BY, MANAGED_BY_LABEL
from tests.support.cluster import ControlPlane, Process, _spawn, free_port, wait_until
from tests.support.operator_harness import REPO, OperatorProcess, operator_command, operator_log_dir, operator_metrics

CHILD_KINDS = tuple(f"{child.plural}.{child.group}".rstrip(".") for child in WATCHED_KINDS)


def python() -> str:
    """This test's own virtual environment's interpreter, with the .venv link resolved: child processes keep the
    environment the suite started in even if the link is pointed at a rebuilt environment meanwhile."""
    return os.path.join(os.path.realpath(sys.prefix), "bin", "python")


def new_namespace(plane: ControlPlane, stem: str) -> str:
    """A fresh namespace for a module-scoped fixture (the caller deletes it)."""
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", name)
    wait_until(lambda: plane.kubectl("get", "serviceaccount", "default", "--namespace", name, "--ignore-not-found",
                                     "--output=name").strip(), message=f"ServiceAccount {name}/default")
    return name


class MeteredOperator(OperatorProcess):
    """The operator as OperatorProcess runs it, plus its Prometheus endpoint (KUBETRAIN_METRICS_PORT)."""

    def __init__(self, plane: ControlPlane, namespace: str, log_path: Path | None = None) -> None:
        super().__init__(plane, namespace, log_path or operator_log_dir() / f"{namespace}.log")
        self.metrics_port = free_port()

    def start(self) -> MeteredOperator:
        command, scope = operator_command(self.namespace, python())
        env = {**self.plane.env(), "PYTHONUNBUFFERED": "1", **scope, "KUBETRAIN_METRICS_PORT": str(self.metrics_port)}
        log = self.log_path.open("ab")
        log.write(f"--- operator start {self.starts + 1} ---\n".encode())
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        self.starts += 1
        return self

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics as {'name{labels}': value}; empty while the endpoint is not up."""
        return operator_metrics(self.metrics_port)

    def reconciles(self) -> int:
        """Reconcile passes since this process started (the count of kubetrain_reconcile_duration_seconds)."""
        return int(self.metrics().get("kubetrain_reconcile_duration_seconds_count", 0))

    def reconcile_errors(self) -> int:
        return int(self.metrics().get("kubetrain_reconcile_errors_total", 0))

    def wait_serving(self) -> None:
        wait_until(lambda: self.metrics() or not self.alive(), timeout=120, message="the operator's /metrics")
        assert self.alive(), f"the operator died at start:\n{self.log_tail()}"


def restart_apiserver(plane: ControlPlane, down_seconds: float = 0.0) -> None:
    """Stop kube-apiserver, keep it down for `down_seconds`, start it again with the same arguments (same port, same
    etcd), and wait until it is ready. Every other component keeps running and has to reconnect on its own."""
    index = next(i for i, p in enumerate(plane.processes) if p.name == "kube-apiserver")
    old: Process = plane.processes[index]
    command = [str(arg) for arg in old.popen.args]
    old.stop()
    time.sleep(down_seconds)
    new = _spawn("kube-apiserver", command, plane.logs)
    plane.processes[index] = new

    def ready() -> bool:
        new.check_alive()
        try:
            return plane.kubectl("get", "--raw", "/readyz", timeout=10).strip() == "ok"
        except Exception:  # connection refused while it starts
            return False

    wait_until(ready, timeout=180, interval=1.0, message="kube-apiserver to be ready again")


def snapshot(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    """Every kubetrain-labelled child in the namespace, plus the DistributedTrainings, in one kubectl call."""
    kinds = ",".join((*CHILD_KINDS, "distributedtrainings.kubetrain.dev"))
    listing = plane.kubectl("get", kinds, "--namespace", namespace, "--output=json")
    items = json.loads(listing)["items"]
    return [o for o in items if o["kind"] == "DistributedTraining" or (
        LABEL_JOB in (o["metadata"].get("labels") or {}) and not kubernetes_managed(o))]


def kubernetes_managed(obj: dict[str, Any]) -> bool:
    """An EndpointSlice Kubernetes keeps for a job's Service: it copies the Service's labels, and follows the Service,
    not the job (the operator writes only the elastic <name>-ready one)."""
    labels = obj["metadata"].get("labels") or {}
    return obj["kind"] == "EndpointSlice" and labels.get(MANAGED_BY_LABEL) != MANAGED_BY


def is_live_pod(pod: dict[str, Any]) -> bool:
    return (not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


class PodsMade:
    """Every pod of the namespace's jobs as the API server announced its creation (a watch, resumed where it ended):
    a pod deleted and made again between two snapshots is still seen twice."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self._core = client.CoreV1Api(kube_config.new_client_from_config(str(plane.kubeconfig)))
        self._namespace = namespace
        self._made: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name=f"pods made in {namespace}", daemon=True)

    def start(self) -> PodsMade:
        self._thread.start()
        assert self._listed.wait(60), "the watch of pods did not start"
        return self

    def stop(self) -> None:
        self._stop.set()

    def drain(self) -> list[dict[str, Any]]:
        """The pods made since the last drain, each as first announced; raises what ended the watch, if it ended."""
        if self._failed is not None:
            raise AssertionError(f"the watch of pods ended: {self._failed}")
        with self._lock:
            made, self._made = self._made, []
        return made

    def _version(self) -> str:
        return str(self._core.list_namespaced_pod(self._namespace, label_selector=LABEL_JOB).metadata.resource_version)

    def _watch(self) -> None:
        try:
            self._follow()
        except BaseException as error:  # told to the test at its next drain
            self._failed = error
            raise

    def _follow(self) -> None:
        version = self._version()
        self._listed.set()
        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(self._core.list_namespaced_pod, self._namespace,
                                                  label_selector=LABEL_JOB, resource_version=version,
                                                  timeout_seconds=30):
                    pod = event["raw_object"]
                    version = pod["metadata"]["resourceVersion"]
                    if event["type"] == "ADDED":
                        with self._lock:
                            self._made.append({**pod, "kind": "Pod"})
            except client.ApiException as error:
                if error.status != 410:
                    raise
                version = self._version()  # too old to resume: what was made meanwhile is not seen
            except (urllib3.exceptions.HTTPError, OSError):  # a dropped connection: resume from the last version seen
                time.sleep(0.5)


@dataclass
class ChildLedger:
    """Every child ever seen, by identity. A child re-made where the existing one should have been kept is a
    duplicate (a second SSH key pair, a second launcher or worker pod for the same attempt). A child whose owner is
    not the DistributedTraining of its label (for launcher pods: its launcher Job) is an orphan once it has stayed so
    for `orphan_grace` seconds: dependents of an owner deleted in the background are removed by the garbage
    collector a moment later, which is not an orphan."""

    uids: dict[tuple[str, ...], set[str]] = field(default_factory=lambda: defaultdict(set))
    duplicates: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    orphan_grace: float = 15.0
    _flagged: set[str] = field(default_factory=set)
    _suspects: dict[str, float] = field(default_factory=dict)

    def observe(self, objects: Iterable[dict[str, Any]], announced: Iterable[dict[str, Any]] = ()
                ) -> tuple[list[str], list[str]]:
        """Account one snapshot, and the pods `announced` since the last one (PodsMade: their identity only);
        returns the duplicates and orphans found."""
        objects = list(objects)
        trainings = {o["metadata"]["name"]: o["metadata"]["uid"] for o in objects if o["kind"] == "DistributedTraining"}
        launcher_jobs = {o["metadata"]["uid"]: o["metadata"]["labels"][LABEL_JOB] for o in objects
                         if o["kind"] == "Job"}
        duplicates, orphans = [], []
        now = time.monotonic()
        present = {o["metadata"]["uid"] for o in objects}
        self._suspects = {uid: seen for uid, seen in self._suspects.items() if uid in present}
        live_workers: dict[str, set[str]] = defaultdict(set)
        live_launchers: dict[str, int] = defaultdict(int)
        for obj in objects:
            if obj["kind"] == "DistributedTraining":
                continue
            meta = obj["metadata"]
            job = meta["labels"][LABEL_JOB]
            role = meta["labels"].get(LABEL_ROLE, "")
            what = f"{obj['kind']} {meta['name']}"
            owners = {ref["uid"] for ref in meta.get("ownerReferences") or []}
            expected_owner = trainings.get(job)
            if obj["kind"] == "Pod" and role == "launcher":
                owned = any(launcher_jobs.get(uid) == job for uid in owners)
            else:
                owned = expected_owner is not None and expected_owner in owners
            if owned or meta.get("deletionTimestamp"):
                self._suspects.pop(meta["uid"], None)
            elif now - self._suspects.setdefault(meta["uid"], now) >= self.orphan_grace:
                if meta["uid"] not in self._flagged:
                    self._flagged.add(meta["uid"])
                    orphans.append(f"{what} (owners {sorted(owners)}, job {job} uid {expected_owner})")
            attempt = self._identity(obj, expected_owner or job, duplicates)
            if obj["kind"] == "Pod" and is_live_pod(obj):
                if role == "worker":
                    live_workers[job].add(attempt)
                elif role == "launcher":
                    live_launchers[job] += 1
        for job, attempts in live_workers.items():
            if len(attempts) > 1:
                duplicates.append(f"{job}: live worker pods of attempts {sorted(attempts)} at once")
        for job, count in live_launchers.items():
            if count > 1:
                duplicates.append(f"{job}: {count} live launcher pods")
        for pod in announced:
            job = pod["metadata"]["labels"][LABEL_JOB]
            self._identity(pod, trainings.get(job) or job, duplicates)
        self.duplicates += duplicates
        self.orphans += orphans
        return duplicates, orphans

    def _identity(self, obj: dict[str, Any], owner: str, duplicates: list[str]) -> str:
        """Record the child's uid under its identity, adding to `duplicates` a second uid for one identity; returns
        its attempt. For pods and the launcher Job the attempt is part of the identity; config children have one per
        job."""
        meta = obj["metadata"]
        attempt = str(meta["labels"].get(LABEL_ATTEMPT, "")) if obj["kind"] in ("Pod", "Job") else ""
        key = (owner, obj["kind"], meta["name"], attempt)
        self.uids[key].add(meta["uid"])
        if len(self.uids[key]) > 1 and meta["uid"] not in self._flagged:
            self._flagged.add(meta["uid"])
            duplicates.append(f"{obj['kind']} {meta['name']} attempt {attempt or '-'} re-created (uid {meta['uid']})")
        return attempt

    def pending_orphans(self) -> int:
        """Children seen without their owner that have not yet been collected (must be 0 at rest)."""
        return len(self._suspects)


def expected_children(body: dict[str, Any], snapshot_items: list[dict[str, Any]]) -> dict[str, int]:
    """Counts of the children of one DistributedTraining in a snapshot, by kind (live pods split by role).

    A failed attempt's kept launcher output (ConfigMap <name>-attempt-<N>-log) is a record of that attempt, not a
    child of the running one: it is left out (its name is one per attempt; test_attempt_logs.py checks them)."""
    name = body["metadata"]["name"]
    counts: dict[str, int] = defaultdict(int)
    for obj in snapshot_items:
        if obj["kind"] == "DistributedTraining" or obj["metadata"]["labels"].get(LABEL_JOB) != name:
            continue
        if obj["metadata"].get("deletionTimestamp") or obj["metadata"]["labels"].get(LABEL_ROLE) == ROLE_ATTEMPT_LOG:
            continue
        if obj["kind"] == "Pod":
            role = obj["metadata"]["labels"].get(LABEL_ROLE)
            state = "live" if is_live_pod(obj) else (obj.get("status") or {}).get("phase", "?")
            counts[f"{role} pods {state}"] += 1
        else:
            counts[obj["kind"]] += 1
    return dict(counts)


def kubectl_as(plane: ControlPlane, kubeconfig: Path, *args: str, input: str | None = None
               ) -> subprocess.CompletedProcess[str]:
    """kubectl with another kubeconfig; returns the completed process (the caller checks the outcome)."""
    return subprocess.run([str(plane.kubectl_path), f"--kubeconfig={kubeconfig}", *args], input=input,
                          capture_output=True, text=True, timeout=60)


def forbidden(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode != 0 and bool(re.search(r"[Ff]orbidden", result.stderr))
