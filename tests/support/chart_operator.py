"""The chart's operator as `helm install` runs it, for tests on the real control plane: the release installed into a
namespace that enforces the 'restricted' Pod Security Standard, and the operator run as a subprocess with the
command, arguments and environment of the installed Deployment's container and the chart's ServiceAccount token
(kwok plays the Deployment's pod: no container really runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.support.chart import helm_binary, token_kubeconfig
from tests.support.cluster import ControlPlane, free_port, wait_until
from tests.support.operator_harness import (
    REPO,
    OperatorProcess,
    create,
    live_pods,
    operator_log_dir,
    training,
    wait_for_pods,
    wait_for_status,
)

CHART = REPO / "charts" / "kubetrain"
CRD_NAME = "distributedtrainings.kubetrain.dev"


def helm(plane: ControlPlane, *args: str) -> str:
    result = subprocess.run([str(helm_binary()), f"--kubeconfig={plane.kubeconfig}", *args],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def whoami(plane: ControlPlane, kubeconfig: Path) -> str:
    result = subprocess.run([str(plane.kubectl_path), f"--kubeconfig={kubeconfig}", "auth", "whoami",
                             "--output=json"], capture_output=True, text=True, timeout=60, check=True)
    return str(json.loads(result.stdout)["status"]["userInfo"]["username"])


class ChartOperator(OperatorProcess):
    """The operator run with the command, arguments and environment of the installed Deployment's container, as the
    chart's ServiceAccount, as if in the Deployment's `pod` (which kwok already 'runs'); only the ports move to free
    ones on loopback."""

    def __init__(self, plane: ControlPlane, deployment: dict[str, Any], pod: dict[str, Any], kubeconfig: Path,
                 log_path: Path) -> None:
        super().__init__(plane, "", log_path)
        self.container = deployment["spec"]["template"]["spec"]["containers"][0]
        self.pod = pod
        self.kubeconfig = kubeconfig
        self.health_port, self.metrics_port = free_port(), free_port()

    def start(self) -> ChartOperator:
        command, args = self.container["command"], self.container["args"]
        assert command[0] == "kopf", command
        args = [re.sub(r"^--liveness=http://0\.0\.0\.0:\d+/", f"--liveness=http://127.0.0.1:{self.health_port}/", a)
                for a in args]
        env = {item["name"]: self._value(item) for item in self.container.get("env", [])}
        env["KUBETRAIN_METRICS_PORT"] = str(self.metrics_port)
        clean = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        log = self.log_path.open("ab")
        log.write(f"--- operator start {self.starts + 1}: {' '.join(command + args)} ---\n".encode())
        self.process = subprocess.Popen(
            [sys.executable, "-m", *command, *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            env={**clean, **env, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"})
        self.starts += 1
        return self

    def _value(self, item: dict[str, Any]) -> str:
        """An env entry's value as the kubelet would resolve it (the downward API: the pod's own metadata)."""
        if "value" in item:
            return str(item["value"])
        field = item["valueFrom"]["fieldRef"]["fieldPath"]
        assert field in ("metadata.namespace", "metadata.name", "metadata.uid"), item
        return str(self.pod["metadata"][field.removeprefix("metadata.")])

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:  # an answer all the same: 500 from a failing health probe
            return error.code, error.read().decode(errors="replace")
        except OSError as error:
            return 0, str(error)


def make_namespace(plane: ControlPlane, made: list[str], stem: str) -> str:
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", name)
    made.append(name)
    return name


def install(plane: ControlPlane, release: str, namespace: str, *values: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """helm install into a namespace that enforces the 'restricted' Pod Security Standard; returns the Deployment and
    its pod once that was admitted and created."""
    plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    helm(plane, "install", release, str(CHART), f"--namespace={namespace}", *values)
    plane.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=120s")
    fullname = release if "kubetrain" in release else f"{release}-kubetrain"
    deployment = plane.get("deployment", fullname, namespace)

    def operator_pod() -> list[dict[str, Any]]:
        listing = plane.kubectl("get", "pods", f"--namespace={namespace}", "--output=json",
                                f"--selector=app.kubernetes.io/instance={release}")
        return list(json.loads(listing)["items"])

    try:
        pods = wait_until(operator_pod, message=f"the operator pod of release {release}")
    except TimeoutError:
        events = plane.kubectl("get", "events", f"--namespace={namespace}")
        raise AssertionError(f"the Deployment's pod was never created (Pod Security admission?):\n{events}") from None
    assert pods[0]["spec"]["containers"][0]["image"] == "kubetrain/operator:0.1.0"
    assert pods[0]["spec"]["serviceAccountName"] == fullname
    return deployment, pods[0]


def run_job_to_success(plane: ControlPlane, operator: ChartOperator, namespace: str, name: str) -> dict[str, Any]:
    """A 2-worker job: workers Ready, then the launcher, which kwok finishes with exit code 0."""
    create(plane, namespace, training(name))
    wait_for_pods(plane, namespace, name, 2)
    launcher = wait_until(lambda: live_pods(plane, namespace, name, role="launcher"),
                          message=f"the launcher pod of {name}")[0]
    plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded")
    return wait_for_status(plane, namespace, name, operator, phase="Succeeded")


def start_operator(plane: ControlPlane, deployment: dict[str, Any], pod: dict[str, Any], namespace: str,
                   tmp_path: Path) -> ChartOperator:
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    kubeconfig = token_kubeconfig(plane, namespace, account, tmp_path / "operator.kubeconfig")
    assert whoami(plane, kubeconfig) == service_account_user(namespace, account)
    operator = ChartOperator(plane, deployment, pod, kubeconfig, operator_log_dir() / f"helm-{namespace}.log").start()
    wait_until(lambda: operator.get(operator.health_port, "/healthz")[0] == 200 or not operator.alive(),
               message="kopf's health endpoint (the probes' target) to answer 200")
    assert operator.alive(), operator.log_tail()
    return operator
