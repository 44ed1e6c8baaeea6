"""`helm install` of charts/kubetrain into the real control plane, then the operator run with the chart's
ServiceAccount token (not admin) exactly as the chart's Deployment runs it: the RBAC is enough to drive a job to
Succeeded, and `kubectl auth can-i` shows what the operator and each job's ServiceAccount cannot do.

kwok plays the Deployment's pod (no container really runs), so the operator itself runs here as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


def can_i(plane: ControlPlane, user: str, verb: str, resource: str, namespace: str | None = None,
          subresource: str | None = None) -> bool:
    """`kubectl auth can-i --as=<user>` (admin impersonating): True for yes, False for no."""
    scope = [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    extra = [f"--subresource={subresource}"] if subresource else []
    result = subprocess.run([str(plane.kubectl_path), f"--kubeconfig={plane.kubeconfig}", "auth", "can-i", verb,
                             resource, f"--as={user}", *scope, *extra], capture_output=True, text=True, timeout=60)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl auth can-i {verb} {resource}: {result.stdout}{result.stderr}"
    return answer == "yes"


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
        except OSError as error:
            return 0, str(error)


@pytest.fixture
def other_namespaces(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Names of the extra namespaces a test makes with `make_namespace`; deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


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


# kopf's optional observers: it lists/watches namespaces (namespaced mode) and CRDs (to notice new resources), and
# when refused it retries, then carries on with the namespaces it was given and the API discovery it already did.
KOPF_OPTIONAL = re.compile(
    r"GET https://[^ ]+/(api/v1/namespaces|apis/apiextensions\.k8s\.io/v1/customresourcedefinitions)[? ]"
    r"|Not enough permissions to (list namespaces|watch for (resources|namespaces))")


def assert_no_forbidden_calls(operator: ChartOperator) -> None:
    """Nothing the operator does for a job is refused; only kopf's optional cluster observers may be."""
    refused = [line for line in operator.log_text().splitlines()
               if re.search(r"\b403\b|[Ff]orbidden", line) and not KOPF_OPTIONAL.search(line)]
    assert not refused, "\n".join(refused[:20])


def test_namespaced_install_runs_jobs_with_only_the_listed_namespaces_rights(
    control_plane: ControlPlane, namespace: str, other_namespaces: list[str], tmp_path: Path
) -> None:
    team = make_namespace(control_plane, other_namespaces, "team")
    other = make_namespace(control_plane, other_namespaces, "other")
    deployment, pod = install(control_plane, "kubetrain", namespace, f"--set=watch.namespaces={{{team}}}")
    env = {item["name"]: item.get("value") for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KUBETRAIN_NAMESPACES"] == team
    assert control_plane.get("role", "kubetrain", team)["rules"]
    assert control_plane.get("rolebinding", "kubetrain", team)["subjects"][0]["namespace"] == namespace
    assert control_plane.get("service", "kubetrain-metrics", namespace)["spec"]["ports"][0]["port"] == 9090

    operator = start_operator(control_plane, deployment, pod, namespace, tmp_path)
    try:
        final = run_job_to_success(control_plane, operator, team, "helm-demo")
        lease = control_plane.get("lease", "kubetrain", namespace)
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ], "the Lease goes with the operator's pod (helm uninstall leaves none)"
        assert final["workers"]["total"] == 2
        status, metrics = operator.get(operator.metrics_port, "/metrics")
        assert status == 200 and 'kubetrain_job_transitions_total{phase="Succeeded"} 1.0' in metrics
        assert_no_forbidden_calls(operator)

        # A job's pods run as the namespace's default account: RBAC lets it patch a status (the chart's admission
        # policy then admits only the job's own pods: tests/reliability/test_security.py) and nothing else.
        job_account = service_account_user(team, "default")
        assert can_i(control_plane, job_account, "patch", "distributedtrainings.kubetrain.dev/helm-demo", team,
                     subresource="status")
        assert not can_i(control_plane, job_account, "get", "distributedtrainings.kubetrain.dev/helm-demo", team,
                         subresource="status")
        assert not can_i(control_plane, job_account, "patch", "distributedtrainings.kubetrain.dev/helm-demo", team)
        assert not can_i(control_plane, job_account, "get", "secrets", team)
        assert not can_i(control_plane, job_account, "create", "pods", team)
        elsewhere = service_account_user(other, "default")
        assert not can_i(control_plane, elsewhere, "patch", "distributedtrainings.kubetrain.dev", other,
                         subresource="status"), "only the watched namespaces' accounts may report progress"
        assert control_plane.get("validatingadmissionpolicybinding", "kubetrain-progress")["spec"]["policyName"] == (
            "kubetrain-progress")
    finally:
        operator.stop()
        print(f"operator log:\n{operator.log_tail(200)}")

    user = service_account_user(namespace, "kubetrain")
    assert can_i(control_plane, user, "create", "pods", team)
    assert can_i(control_plane, user, "patch", "distributedtrainings.kubetrain.dev", team, subresource="status")
    for verb, resource, where in [
        ("get", "secrets", other), ("list", "secrets", other), ("create", "pods", other),
        ("list", "distributedtrainings.kubetrain.dev", other), ("get", "secrets", namespace),
        ("list", "distributedtrainings.kubetrain.dev", None), ("list", "pods", None),
        ("delete", "nodes", None), ("get", "nodes", None), ("list", "namespaces", None),
        ("patch", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
        ("create", "clusterrolebindings", None), ("create", "clusterroles", None),
        ("delete", "secrets", team), ("update", "secrets", team), ("patch", "deployments.apps", team),
        ("escalate", "roles", team), ("bind", "roles", team),
    ]:
        assert not can_i(control_plane, user, verb, resource, where), f"the operator can {verb} {resource} in {where}"
    assert not can_i(control_plane, user, "create", "pods", team, subresource="exec"), "the operator can exec"


def test_cluster_wide_install_runs_jobs_in_any_namespace_and_nothing_more(
    control_plane: ControlPlane, namespace: str, other_namespaces: list[str], tmp_path: Path
) -> None:
    release = f"kt-{uuid.uuid4().hex[:6]}"
    deployment, pod = install(control_plane, release, namespace)
    try:
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--all-namespaces" in args
        fullname = f"{release}-kubetrain"
        binding = control_plane.get("clusterrolebinding", fullname)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": fullname, "namespace": namespace}]

        jobs = make_namespace(control_plane, other_namespaces, "jobs")
        wait_until(lambda: control_plane.kubectl("get", "serviceaccount", "default", f"--namespace={jobs}",
                                                 "--ignore-not-found", "--output=name").strip(),
                   message=f"ServiceAccount {jobs}/default")
        operator = start_operator(control_plane, deployment, pod, namespace, tmp_path)
        try:
            run_job_to_success(control_plane, operator, jobs, "cluster-demo")
            assert_no_forbidden_calls(operator)
        finally:
            operator.stop()
            print(f"operator log:\n{operator.log_tail(200)}")

        user = service_account_user(namespace, fullname)
        assert can_i(control_plane, user, "list", "distributedtrainings.kubetrain.dev", None)
        assert can_i(control_plane, user, "create", "pods", "any-namespace")
        for verb, resource, where in [
            ("delete", "nodes", None), ("get", "nodes", None), ("create", "namespaces", None),
            ("delete", "namespaces", None), ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
            ("update", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
            ("delete", f"customresourcedefinitions.apiextensions.k8s.io/{CRD_NAME}", None),
            ("create", "clusterroles", None), ("create", "clusterrolebindings", None),
            ("delete", "secrets", "any-namespace"), ("patch", "deployments.apps", "any-namespace"),
            ("impersonate", "serviceaccounts", "any-namespace"),
        ]:
            assert not can_i(control_plane, user, verb, resource, where), f"the operator can {verb} {resource}"
        assert not can_i(control_plane, user, "create", "pods", "any-namespace", subresource="exec")
    finally:
        helm(control_plane, "uninstall", release, f"--namespace={namespace}")
    for kind, name in (("clusterrole", f"{release}-kubetrain"), ("clusterrole", f"{release}-kubetrain-progress"),
                       ("validatingadmissionpolicy", f"{release}-kubetrain-progress")):
        assert not control_plane.kubectl("get", kind, name, "--ignore-not-found").strip(), f"{kind} {name} left"
