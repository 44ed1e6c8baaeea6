"""The test control plane (tests/controlplane) for the operator benchmark: start it, give the operator its own
identity, run the real operator, scrape /metrics.

The operator runs as a ServiceAccount bound to cluster-admin rather than as the admin user, so the API server's
API Priority and Fairness metrics can tell its requests from everyone else's: ServiceAccounts outside kube-system fall
into the `service-accounts` flow schema, which nothing else in this control plane uses (the controller manager's
accounts live in kube-system; the scheduler, kwok and kubectl have their own users).
"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.support.cluster import ControlPlane, binary_dir, free_port, wait_until
from tests.support.operator_harness import CRD, REPO, operator_command, training

from .processes import stop_process
from .prometheus import Sample, parse

__all__ = ["REPO", "ControlPlane", "binary_dir", "free_port", "install_crd", "training", "wait_until",
           "OPERATOR_FLOW_SCHEMA", "operator_kubeconfig", "OperatorRun", "scrape_apiserver", "scrape_url"]

OPERATOR_NAMESPACE = "kubetrain-bench"
OPERATOR_ACCOUNT = "kubetrain-operator"
OPERATOR_FLOW_SCHEMA = "service-accounts"


def install_crd(plane: ControlPlane) -> None:
    """Apply the chart's CRD and wait until it is Established and served (polling: `kubectl wait` fails outright
    when it reads the CRD before the API server has written any condition)."""
    plane.kubectl("apply", f"--filename={CRD}")

    def established() -> bool:
        conditions = (plane.get("crd", "distributedtrainings.kubetrain.dev").get("status") or {}).get("conditions")
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions or [])

    wait_until(established, message="the DistributedTraining CRD to be Established")
    wait_until(lambda: "distributedtrainings" in plane.kubectl("api-resources", "--api-group=kubetrain.dev"),
               message="the DistributedTraining API to be served")


def operator_kubeconfig(plane: ControlPlane, path: Path) -> Path:
    """Create the operator's ServiceAccount (cluster-admin) and write a kubeconfig that uses its token."""
    plane.kubectl("create", "namespace", OPERATOR_NAMESPACE)
    plane.kubectl("create", "serviceaccount", OPERATOR_ACCOUNT, "--namespace", OPERATOR_NAMESPACE)
    plane.kubectl("create", "clusterrolebinding", f"{OPERATOR_NAMESPACE}-{OPERATOR_ACCOUNT}",
                  "--clusterrole=cluster-admin", f"--serviceaccount={OPERATOR_NAMESPACE}:{OPERATOR_ACCOUNT}")
    token = plane.kubectl("create", "token", OPERATOR_ACCOUNT, "--namespace", OPERATOR_NAMESPACE,
                          "--duration=24h").strip()
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    config = {
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": OPERATOR_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": admin["clusters"][0]["name"],
                                                      "user": OPERATOR_ACCOUNT}}],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def scrape_apiserver(plane: ControlPlane) -> list[Sample]:
    """The API server's /metrics, read as the admin."""
    return parse(plane.kubectl("get", "--raw", "/metrics"))


def scrape_url(url: str) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse(response.read().decode())


class OperatorRun:
    """The operator for one namespace (operator_harness.operator_command) as the operator's ServiceAccount, with its
    Prometheus metrics on a free port."""

    def __init__(self, plane: ControlPlane, kubeconfig: Path, namespace: str, log: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> None:
        """`wrap`: runs the command under something (a memory cgroup) that then execs it, keeping its pid."""
        port = free_port()
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        command, scope = operator_command(namespace)
        env = {**plane.env(), "KUBECONFIG": str(kubeconfig), "KUBETRAIN_METRICS_PORT": str(port),
               "PYTHONUNBUFFERED": "1", **scope}
        self.log = log
        with log.open("ab") as output:
            self.process = subprocess.Popen(wrap(command) if wrap else command, stdout=output,
                                            stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until /metrics answers, i.e. the operator's startup handler has run."""

        def serving() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited {self.process.returncode}; log {self.log}:\n{self.tail()}")
            try:
                scrape_url(self.metrics_url)
            except OSError:
                return False
            return True

        wait_until(serving, timeout, message="the operator's /metrics endpoint")

    def metrics(self) -> list[Sample]:
        return scrape_url(self.metrics_url)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        stop_process(self.process)

