"""Security of what the operator makes, on the real API server: one SSH key pair per job that never shows up in
logs, events or status; the key Secret mounted read-only 0400, its private key into the launcher alone; pods admitted
under the 'restricted' Pod Security Standard; and a job pod's token refused everything but writing its own job's
progress (the chart's progress RBAC and admission policy, applied here as `helm install` applies them), which a pod
the operator did not create cannot do whatever its name.

tests/controlplane/test_helm_install.py proves the operator's own (chart) RBAC with `kubectl auth can-i`. Here a job
pod's token is tried with real requests.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kubetrain.contract import GROUP, KIND, LABEL_ATTEMPT, LABEL_INDEX, LABEL_JOB, LABEL_ROLE, VERSION
from tests.reliability.fault_harness import MeteredOperator, forbidden, kubectl_as, new_namespace
from tests.reliability.figures import FIGURES
from tests.support.chart import patch_status, progress_access, report_progress, token_kubeconfig
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import children, create, training, wait_for_status

pytestmark = pytest.mark.controlplane

JOBS = ("alpha", "beta")
SSH_MODE = 0o400
SSH_KEYS = {"worker": {"authorized_keys", "ssh_host_ed25519_key"}, "launcher": {"id_ed25519", "ssh_config",
                                                                               "known_hosts"}}


@dataclass
class Deployment:
    plane: ControlPlane
    namespace: str
    operator: MeteredOperator


@pytest.fixture(scope="module")
def deployed(crd: ControlPlane) -> Iterator[Deployment]:
    """Two running jobs in a namespace that enforces the restricted Pod Security Standard, with the chart's progress
    RBAC and admission policy."""
    namespace = new_namespace(crd, "security")
    crd.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/enforce-version=latest")
    operator = MeteredOperator(crd, namespace)
    try:
        with progress_access(crd, namespace):
            operator.start()
            for name in JOBS:
                create(crd, namespace, training(name, resources={"gpusPerWorker": 0}))
            for name in JOBS:
                wait_for_status(crd, namespace, name, operator, phase="Running", timeout=180)
            yield Deployment(crd, namespace, operator)
    finally:
        operator.stop()
        crd.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")


def ssh_secret(deployed: Deployment, name: str) -> dict[str, str]:
    data = deployed.plane.get("secret", f"{name}-ssh", deployed.namespace)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def test_each_job_has_its_own_working_key_pair(deployed: Deployment) -> None:
    keys = {name: ssh_secret(deployed, name) for name in JOBS}
    for name, files in keys.items():
        private = serialization.load_ssh_private_key(files["id_ed25519"].encode(), password=None)
        derived = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                    serialization.PublicFormat.OpenSSH).decode()
        assert files["id_ed25519.pub"].split()[:2] == derived.split()[:2], f"{name}: public key is not the pair's"
        assert files["authorized_keys"].strip() == files["id_ed25519.pub"].strip()
    assert keys["alpha"]["id_ed25519"] != keys["beta"]["id_ed25519"]
    assert keys["alpha"]["id_ed25519.pub"].split()[1] != keys["beta"]["id_ed25519.pub"].split()[1]


def test_private_keys_appear_nowhere_but_their_secret(deployed: Deployment) -> None:
    plane, namespace = deployed.plane, deployed.namespace
    needles: dict[str, str] = {}
    for name in JOBS:
        pem = ssh_secret(deployed, name)["id_ed25519"]
        needles[f"{name} private key (base64 of the PEM)"] = base64.b64encode(pem.encode()).decode()[:60]
        for index, line in enumerate(pem.splitlines()):
            if len(line) >= 20 and "PRIVATE KEY" not in line:
                needles[f"{name} private key line {index}"] = line
    needles["PEM header"] = "PRIVATE KEY-----"
    haystacks = {
        "operator log": deployed.operator.log_text(),
        "events": plane.kubectl("get", "events", "--namespace", namespace, "--output=json"),
        "DistributedTrainings (spec, status, metadata)": plane.kubectl("get", "dtr", "--namespace", namespace,
                                                                        "--output=json"),
        "pods": plane.kubectl("get", "pods", "--namespace", namespace, "--output=json"),
        "launcher Jobs": plane.kubectl("get", "jobs", "--namespace", namespace, "--output=json"),
        "ConfigMaps": plane.kubectl("get", "configmaps", "--namespace", namespace, "--output=json"),
        "Secret metadata": json.dumps([s["metadata"] for s in json.loads(
            plane.kubectl("get", "secrets", "--namespace", namespace, "--output=json"))["items"]]),
    }
    leaks = [f"{what} in {where}" for where, text in haystacks.items() for what, needle in needles.items()
             if needle in text]
    FIGURES.count("private keys leaked", len(leaks))
    assert not leaks, leaks


def test_key_secret_is_mounted_read_only_0400_into_its_own_job_only_the_private_key_into_the_launcher_alone(
        deployed: Deployment) -> None:
    for name in JOBS:
        pods = children(deployed.plane, deployed.namespace, name, "pods")
        assert {p["metadata"]["labels"][LABEL_ROLE] for p in pods} == {"worker", "launcher"}
        for pod in pods:
            secrets = {v["name"]: v["secret"] for v in pod["spec"]["volumes"] if "secret" in v}
            assert [s["secretName"] for s in secrets.values()] == [f"{name}-ssh"], pod["metadata"]["name"]
            (volume, source), = secrets.items()
            assert source["defaultMode"] == SSH_MODE, f"{pod['metadata']['name']}: mode {oct(source['defaultMode'])}"
            role = pod["metadata"]["labels"][LABEL_ROLE]
            mounted = {item["key"] for item in source.get("items") or [{"key": "every key"}]}
            assert mounted == SSH_KEYS[role], f"{pod['metadata']['name']} mounts {sorted(mounted)}"
            for container in pod["spec"]["containers"]:
                mounts = [m for m in container["volumeMounts"] if m["name"] == volume]
                assert mounts and all(m.get("readOnly") for m in mounts), container["name"]


def test_pods_are_admitted_as_restricted_non_root_read_only(deployed: Deployment) -> None:
    """The namespace enforces Pod Security 'restricted', so the API server already refused any pod that runs as root,
    may escalate, keeps capabilities or uses host namespaces; the fields are checked here besides."""
    pods = json.loads(deployed.plane.kubectl("get", "pods", "--namespace", deployed.namespace,
                                             "--output=json"))["items"]
    assert len(pods) == 3 * len(JOBS)
    for pod in pods:
        spec, where = pod["spec"], pod["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0, where
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), where
        assert not [v for v in spec["volumes"] if "hostPath" in v], where
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"] and not context["capabilities"].get("add"), where
            assert not context.get("privileged"), where
        role = pod["metadata"]["labels"][LABEL_ROLE]
        assert spec["serviceAccountName"] == "default", "no account of its own: the admission policy limits the token"
        if role == "launcher":
            assert spec["automountServiceAccountToken"] is False, "the launcher needs no API access"


def test_a_job_pods_token_writes_only_its_own_jobs_status(deployed: Deployment, tmp_path: Path) -> None:
    plane, namespace = deployed.plane, deployed.namespace
    ns = f"--namespace={namespace}"
    alpha = token_kubeconfig(plane, namespace, "default", tmp_path / "alpha.kubeconfig", pod="alpha-worker-0")
    unbound = token_kubeconfig(plane, namespace, "default", tmp_path / "unbound.kubeconfig")

    def run(config: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return kubectl_as(plane, config, ns, *args, input=input)

    wait_until(lambda: str(report_progress(unbound, namespace, "alpha")).startswith("403"),
               message="the chart's admission policy to be in force")
    own = report_progress(alpha, namespace, "alpha")
    assert own is None, f"rank 0 must be able to report progress: {own}"
    assert plane.get("dtr", "alpha", namespace)["status"]["progress"]["epoch"] == 1

    pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder"},
                      "spec": {"containers": [{"name": "x", "image": "busybox"}]}})
    binding = json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "grab"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                    "kind": "ClusterRole", "name": "admin"},
                          "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]})
    attempts = {
        "read its own key Secret": run(alpha, "get", "secret", "alpha-ssh"),
        "read another job's key Secret": run(alpha, "get", "secret", "beta-ssh"),
        "list Secrets": run(alpha, "get", "secrets"),
        "create a pod": run(alpha, "create", "--filename=-", input=pod),
        "exec into a worker": run(alpha, "exec", "alpha-worker-0", "--", "true"),
        "patch another job's spec": run(alpha, "patch", "dtr", "beta", "--type=merge",
                                        '--patch={"spec":{"runPolicy":{"suspend":true}}}'),
        "patch its own spec": run(alpha, "patch", "dtr", "alpha", "--type=merge",
                                  '--patch={"spec":{"runPolicy":{"backoffLimit":100}}}'),
        "delete its own job": run(alpha, "delete", "dtr", "alpha", "--wait=false"),
        "read its own job": run(alpha, "get", "dtr", "alpha"),
        "read another job": run(alpha, "get", "dtr", "beta"),
        "bind itself a stronger role": run(alpha, "create", "--filename=-", input=binding),
        "read the hostfile ConfigMaps": run(alpha, "get", "configmaps"),
    }
    allowed = {what: result.stderr or result.stdout for what, result in attempts.items() if not forbidden(result)}
    another, no_pod = report_progress(alpha, namespace, "beta"), report_progress(unbound, namespace, "alpha")
    for what, refusal in (("patch another job's status", another), ("report with a token bound to no pod", no_pod)):
        if not str(refusal).startswith("403"):
            allowed[what] = str(refusal)
    FIGURES.count("job pod token requests not refused", len(allowed))
    assert not allowed, allowed
    assert "only the pods the operator created for DistributedTraining beta may report its progress" in str(another), (
        another)
    assert "is not bound to a pod" in str(no_pod), no_pod
    assert plane.get("dtr", "beta", namespace).get("status", {}).get("progress") is None
    assert plane.get("dtr", "alpha", namespace)["spec"]["runPolicy"]["backoffLimit"] == 3


def intruder_pod(plane: ControlPlane, namespace: str, job: str, name: str) -> dict:
    """A pod made by hand to pass for one of `job`'s workers: a worker's name, the job's labels and owner, and what
    the namespace's Pod Security 'restricted' level asks."""
    training = plane.get("dtr", job, namespace)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {LABEL_JOB: job, LABEL_ROLE: "worker", LABEL_INDEX: name.rsplit("-")[-1],
                                              LABEL_ATTEMPT: str(training["status"].get("attempt", 0))},
                     "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": job,
                                          "uid": training["metadata"]["uid"]}]},
        "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                     "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "x", "image": "busybox", "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]},
    }


def test_a_pod_named_like_a_worker_cannot_end_the_job_and_a_worker_reports_progress_only(
        deployed: Deployment, tmp_path: Path) -> None:
    plane, namespace = deployed.plane, deployed.namespace
    unbound = token_kubeconfig(plane, namespace, "default", tmp_path / "unbound.kubeconfig")
    wait_until(lambda: str(report_progress(unbound, namespace, "alpha")).startswith("403"),
               message="the chart's admission policy to be in force")
    intruder = json.loads(plane.kubectl("create", "--namespace", namespace, "--filename=-", "--output=json",
                                        input=json.dumps(intruder_pod(plane, namespace, "alpha", "alpha-worker-99"))))
    try:
        forged = token_kubeconfig(plane, namespace, "default", tmp_path / "forged.kubeconfig", pod="alpha-worker-99")
        own = token_kubeconfig(plane, namespace, "default", tmp_path / "own.kubeconfig", pod="alpha-worker-0")
        end = {"status": {"phase": "Succeeded", "completionTime": "2026-01-01T00:00:00Z"}}
        refused = {
            "the forged pod ends the job": patch_status(forged, namespace, "alpha", end),
            "the forged pod reports progress": report_progress(forged, namespace, "alpha"),
            "a worker ends its job": patch_status(own, namespace, "alpha", end),
            "a worker rewrites what the limits count": patch_status(own, namespace, "alpha", {"status": {
                "progress": {"epoch": 2}, "restarts": 9, "attempt": 9, "startTime": "2099-01-01T00:00:00Z"}}),
            "a worker adds itself a reporter": patch_status(own, namespace, "alpha", {"status": {"podUIDs": ["x"]}}),
            "a worker blames another rank": patch_status(own, namespace, "alpha", {"status": {
                "failure": {"rank": 1, "pod": "alpha-worker-1", "lastLines": ["it was rank 1"]}}}),
        }
        accepted = report_progress(own, namespace, "alpha")
        FIGURES.count("forged status writes admitted", sum(1 for refusal in refused.values() if refusal is None))
        assert accepted is None, f"a worker's own token must report progress: {accepted}"
        assert all(str(refusal).startswith("403") for refusal in refused.values()), refused
        assert ("only the pods the operator created for DistributedTraining alpha may report its progress: this token "
                "belongs to pod alpha-worker-99") in str(refused["the forged pod ends the job"])
        only = "the pods of DistributedTraining alpha may report only status.progress and status.checkpoint; refused: "
        for what, fields in (("a worker ends its job", ("completionTime", "phase")),
                             ("a worker rewrites what the limits count", ("attempt", "restarts", "startTime")),
                             ("a worker adds itself a reporter", ("podUIDs",)),
                             ("a worker blames another rank", ("failure",))):
            message = str(refused[what])
            assert only in message and all(f"status.{field}" in message for field in fields), (what, message)

        time.sleep(3)  # what the operator would do with a forged Succeeded, it would have started by now
        status = plane.get("dtr", "alpha", namespace)["status"]
        assert status["phase"] == "Running", status
        workers = [p for p in children(plane, namespace, "alpha", "pods")
                   if p["metadata"]["labels"][LABEL_ROLE] == "worker" and p["metadata"]["name"] != "alpha-worker-99"]
        assert sorted(p["metadata"]["name"] for p in workers) == ["alpha-worker-0", "alpha-worker-1"]
        assert not any(p["metadata"].get("deletionTimestamp") for p in workers)
        # its two workers and its launcher pod, not the intruder
        assert intruder["metadata"]["uid"] not in status["podUIDs"] and len(status["podUIDs"]) == 3
    finally:
        plane.kubectl("delete", "pod", "alpha-worker-99", "--namespace", namespace, "--wait=false",
                      "--ignore-not-found")
