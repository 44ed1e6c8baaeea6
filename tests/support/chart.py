"""The chart as tests use it: the helm binary, rendered templates, the progress access of a namespace's job pods,
kubeconfigs holding a ServiceAccount token, and a progress report as rank 0 sends it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from kubetrain.contract import GROUP, PLURAL, VERSION
from tests.support.cluster import ControlPlane

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "kubetrain"


def helm_binary() -> Path:
    """The helm that .ci/install-kubetools unpacks into the kubetrain cache; fails (never skips) without it."""
    cache = Path(os.environ.get("KUBETRAIN_CACHE", Path.home() / ".cache" / "kubetrain"))
    path = cache / "bin" / "helm"
    if not os.access(path, os.X_OK):
        pytest.fail(f"helm not found at {path}; install it: .ci/install-kubetools .venv {path.parent}", pytrace=False)
    return path


def render_template(template: str, release: str, namespace: str, *values: str) -> str:
    """One template of the chart, rendered as `helm install` would."""
    result = subprocess.run([str(helm_binary()), "template", release, str(CHART), f"--namespace={namespace}",
                             f"--show-only=templates/{template}", *values], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@contextmanager
def progress_access(plane: ControlPlane, namespace: str) -> Iterator[None]:
    """The chart's progress RBAC and admission policy for the jobs of `namespace`, as `helm install` applies them
    (templates/progress.yaml), removed afterwards."""
    manifest = render_template("progress.yaml", f"kt-{namespace}"[:40].rstrip("-"), "kubetrain-system",
                               f"--set=watch.namespaces={{{namespace}}}")
    plane.kubectl("apply", "--filename=-", input=manifest)
    try:
        yield
    finally:
        plane.kubectl("delete", "--filename=-", "--ignore-not-found", "--wait=false", input=manifest)


def report_progress(kubeconfig: Path, namespace: str, job: str) -> str | None:
    """A progress report as rank 0 sends it (trainlib.kube_status: one merge patch of the status, no read first) with
    the credentials in `kubeconfig`: None when accepted, else the API server's refusal."""
    return patch_status(kubeconfig, namespace, job, {"status": {"progress": {"epoch": 1, "epochs": 2}}})


def patch_status(kubeconfig: Path, namespace: str, job: str, body: dict) -> str | None:
    """A merge patch of the job's status with the credentials in `kubeconfig`: None when accepted, else the API
    server's refusal."""
    api = client.CustomObjectsApi(kube_config.new_client_from_config(str(kubeconfig)))
    try:
        api.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, job, body,
                                                  _content_type="application/merge-patch+json")
    except ApiException as error:
        return f"{error.status} {error.reason}: {error.body}"
    return None


def token_kubeconfig(plane: ControlPlane, namespace: str, account: str, path: Path, pod: str | None = None) -> Path:
    """A kubeconfig whose only credential is a token of the ServiceAccount; with `pod`, bound to that pod, as the
    kubelet mounts it into the pod."""
    bound = []
    if pod is not None:
        uid = plane.get("pod", pod, namespace)["metadata"]["uid"]
        bound = ["--bound-object-kind=Pod", f"--bound-object-name={pod}", f"--bound-object-uid={uid}"]
    token = plane.kubectl("create", "token", account, f"--namespace={namespace}", "--duration=1h", *bound).strip()
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    user = pod or account
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kubetrain-test", "cluster": {
            "server": plane.server, "certificate-authority-data": cluster["certificate-authority-data"]}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "kubetrain-test", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
