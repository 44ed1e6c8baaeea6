"""Run the real kubetrain operator (kopf) against the test control plane, and read what a user would read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kubetrain.contract import LABEL_JOB, LABEL_ROLE
from tests.support.cluster import ControlPlane, KubectlError, wait_until

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "charts" / "kubetrain" / "crds" / "distributedtrainings.kubetrain.dev.yaml"


def operator_command(namespace: str, python: str = sys.executable) -> tuple[list[str], dict[str, str]]:
    """The operator as the chart runs it, for one namespace: its command line and the environment it adds."""
    return ([python, "-m", "kopf", "run", "--standalone", "--all-namespaces", "-m", "kubetrain.reconcile"],
            {"KUBETRAIN_NAMESPACES": namespace})


def install_crd(plane: ControlPlane) -> None:
    """Apply the chart's CRD and wait until the API server serves it."""
    plane.kubectl("apply", f"--filename={CRD}")

    def established() -> bool:  # polled: `kubectl wait` fails outright if no condition is written yet
        crd = plane.get("crd", "distributedtrainings.kubetrain.dev")
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])  # null right after the apply

    wait_until(established, message="the DistributedTraining CRD to be Established")
    wait_until(lambda: "distributedtrainings" in plane.kubectl("api-resources", "--api-group=kubetrain.dev"),
               message="the DistributedTraining API to be served")


class OperatorProcess:
    """The operator (`operator_command`) as a child process, watching one namespace."""

    def __init__(self, plane: ControlPlane, namespace: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.plane = plane
        self.namespace = namespace
        self.log_path = log_path
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> OperatorProcess:
        command, scope = operator_command(self.namespace)
        env = {**self.plane.env(), "PYTHONUNBUFFERED": "1", **scope, **self.env}
        log = self.log_path.open("ab")
        log.write(f"--- operator start {self.starts + 1} ---\n".encode())
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, as when a node dies under the operator."""
        self.stop(signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def operator_watching(plane: ControlPlane, namespace: str,
                      env: dict[str, str] | None = None) -> Iterator[OperatorProcess]:
    """The body of a yield fixture: the operator watching `namespace` (the CRD installed already), stopped after the
    test; its log is printed then, which pytest shows when the test fails."""
    log = operator_log_dir() / f"{namespace}.log"
    process = OperatorProcess(plane, namespace, log, env).start()
    yield process
    process.stop()
    print(f"operator log ({log}):\n{process.log_tail(200)}")


def training(name: str, **spec: Any) -> dict[str, Any]:
    """A small DistributedTraining for the fake GPU nodes (kwok never runs the image)."""
    body: dict[str, Any] = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "DistributedTraining",
        "metadata": {"name": name},
        "spec": {"image": "kubetrain/mnist:0.1.0", "command": ["python", "-m", "mnist", "--epochs", "2"],
                 "workers": 2, "resources": {"gpusPerWorker": 1}},
    }
    body["spec"].update(spec)
    return body


def create(plane: ControlPlane, namespace: str, body: dict[str, Any]) -> None:
    plane.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(body))


def get_training(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return plane.get("distributedtraining", name, namespace)


def status(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return get_training(plane, namespace, name).get("status") or {}


def children(plane: ControlPlane, namespace: str, name: str, kind: str) -> list[dict[str, Any]]:
    listing = plane.kubectl("get", kind, "--namespace", namespace, f"--selector={LABEL_JOB}={name}", "--output=json")
    return list(json.loads(listing)["items"])


def live_pods(plane: ControlPlane, namespace: str, name: str, role: str = "worker") -> list[dict[str, Any]]:
    return [p for p in children(plane, namespace, name, "pods")
            if p["metadata"]["labels"].get(LABEL_ROLE) == role and not p["metadata"].get("deletionTimestamp")]


def wait_for_status(plane: ControlPlane, namespace: str, name: str, operator: OperatorProcess,
                    timeout: float = 120.0, **expected: Any) -> dict[str, Any]:
    """Wait until status has every expected key/value (e.g. phase="Running"); fail with the operator's log."""
    last: dict[str, Any] = {}

    def matches() -> dict[str, Any] | None:
        nonlocal last
        if not operator.alive():
            raise AssertionError(f"the operator died:\n{operator.log_tail()}")
        last = status(plane, namespace, name)
        return last if all(last.get(k) == v for k, v in expected.items()) else None

    try:
        return wait_until(matches, timeout, message=f"{namespace}/{name} status {expected}")
    except Exception as error:
        raise AssertionError(f"{error}\nlast status: {yaml.safe_dump(last)}\noperator log:\n{operator.log_tail()}") \
            from None


def wait_for_pods(plane: ControlPlane, namespace: str, name: str, count: int, ready: bool = True,
                  role: str = "worker", timeout: float = 120.0) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]] | None:
        pods = live_pods(plane, namespace, name, role)
        if ready:
            pods = [p for p in pods if any(c.get("type") == "Ready" and c.get("status") == "True"
                                           for c in p.get("status", {}).get("conditions", []))]
        return pods if len(pods) == count else None

    return wait_until(enough, timeout, message=f"{count} {'ready ' if ready else ''}{role} pods of {name}")


def wait_gone(plane: ControlPlane, kind: str, name: str, namespace: str, timeout: float = 120.0) -> None:
    def gone() -> bool:
        try:
            plane.get(kind, name, namespace)
        except KubectlError:
            return True
        return False

    wait_until(gone, timeout, message=f"{kind} {namespace}/{name} to be deleted")


def events(plane: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    listing = plane.kubectl("get", "events", "--namespace", namespace,
                            f"--field-selector=involvedObject.name={name}", "--output=json")
    return list(json.loads(listing)["items"])


def posted(plane: ControlPlane, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    """The job's events of this reason, once there is one: the operator posts events off its critical path."""
    return wait_until(lambda: [e for e in events(plane, namespace, name) if e["reason"] == reason] or None,
                      message=f"a {reason} event of {name}")


def pause(seconds: float) -> None:
    """Let the operator act (used only to give a wrong behaviour the chance to show, never as a timing check)."""
    time.sleep(seconds)


def operator_metrics(port: int) -> dict[str, float]:
    """Every sample of the operator's /metrics on `port` as {'name{labels}': value}; empty while it is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def operator_log_dir() -> Path:
    path = Path(os.environ.get("KUBETRAIN_TEST_LOGS", "/tmp/kubetrain-test-logs"))
    path.mkdir(parents=True, exist_ok=True)
    return path
