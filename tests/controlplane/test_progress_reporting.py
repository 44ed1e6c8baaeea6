"""Rank 0 of a real training run reports progress into the job's status with the job's own ServiceAccount token."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import OperatorProcess, create, install_crd, operator_watching, training


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[OperatorProcess]:
    install_crd(control_plane)
    yield from operator_watching(control_plane, namespace)


def job_kubeconfig(plane: ControlPlane, namespace: str, service_account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the job's ServiceAccount, as its mounted token does in a pod."""
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    token = plane.kubectl("create", "token", service_account, "--namespace", namespace, "--duration=1h").strip()
    cluster = admin["clusters"][0]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "job",
        "clusters": [cluster],
        "users": [{"name": "job", "user": {"token": token}}],
        "contexts": [{"name": "job", "context": {"cluster": cluster["name"], "user": "job", "namespace": namespace}}],
    }))
    return path


def test_rank_zero_reports_epochs_metrics_and_checkpoint(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    create(control_plane, namespace, training("digits", workers=1, resources={"gpusPerWorker": 0}))
    wait_until(lambda: control_plane.kubectl("get", "serviceaccount", "digits-job", "--namespace", namespace,
                                             "--ignore-not-found", "--output=name").strip(),
               message="the job's ServiceAccount")
    kubeconfig = job_kubeconfig(control_plane, namespace, "digits-job", tmp_path / "job.kubeconfig")
    data, checkpoints = tmp_path / "data", tmp_path / "checkpoints"
    subprocess.run([sys.executable, "-m", "cifar_mixup.convert", "digits", "--out", str(data)], check=True,
                   capture_output=True, timeout=300)

    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig),
        "KUBETRAIN_REPORT_STATUS": "1", "KUBETRAIN_NAMESPACE": namespace, "KUBETRAIN_JOB_NAME": "digits",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    run = subprocess.run(
        [sys.executable, "-m", "cifar_mixup", "--data-dir", str(data), "--checkpoint-dir", str(checkpoints),
         "--epochs", "2", "--batch-size", "64", "--seed", "1"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "could not report" not in run.stderr + run.stdout, "every status patch went through"

    # the operator derives the `kubectl get` columns from what rank 0 wrote
    status = wait_until(lambda: (s := control_plane.get("dtr", "digits", namespace)["status"]).get("metric") and s,
                        message="the operator to show the reported metric")
    progress = status["progress"]
    assert (progress["epoch"], progress["epochs"]) == (2, 2)
    assert 0.0 <= progress["metrics"]["val_accuracy"] <= 1.0 and progress["metrics"]["loss"] > 0
    assert progress["updatedAt"]
    assert status["checkpoint"]["epoch"] == 2 and Path(status["checkpoint"]["path"]).exists()

    row = control_plane.kubectl("get", "dtr", "digits", "--namespace", namespace, "--no-headers").split()
    assert row[3] == "2/2" and row[4].startswith("val_accuracy=")  # NAME PHASE WORKERS EPOCH METRIC AGE

    shown = subprocess.run([str(Path(sys.executable).parent / "kubetrain"), "status", "digits", "-n", namespace],
                           env=control_plane.env(), capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "epoch 2/2" in shown.stdout and f"checkpoint: {status['checkpoint']['path']}" in shown.stdout

    # the token is good for this job's status only
    other = training("other", workers=1, resources={"gpusPerWorker": 0})
    create(control_plane, namespace, other)
    denied = subprocess.run(
        [str(control_plane.kubectl_path), f"--kubeconfig={kubeconfig}", "patch", "dtr", "other", "--type=merge",
         "--subresource=status", "--patch", json.dumps({"status": {"progress": {"epoch": 99}}})],
        capture_output=True, text=True, timeout=60,
    )
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
