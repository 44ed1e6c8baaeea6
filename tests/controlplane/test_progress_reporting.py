"""Rank 0 of a real training run reports progress into the job's status with its pod's ServiceAccount token, which the
chart's admission policy lets write this job's status only."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chart import progress_access, report_progress, token_kubeconfig
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    install_crd,
    operator_watching,
    training,
    wait_for_pods,
)


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[OperatorProcess]:
    install_crd(control_plane)
    with progress_access(control_plane, namespace):
        yield from operator_watching(control_plane, namespace)


def test_rank_zero_reports_epochs_metrics_and_checkpoint(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    create(control_plane, namespace, training("digits", workers=1, resources={"gpusPerWorker": 0}))
    wait_for_pods(control_plane, namespace, "digits", 1)
    # what the kubelet mounts into rank 0's pod: a token of the namespace's account, bound to the pod
    kubeconfig = token_kubeconfig(control_plane, namespace, "default", tmp_path / "job.kubeconfig",
                                  pod="digits-worker-0")
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
    create(control_plane, namespace, training("other", workers=1, resources={"gpusPerWorker": 0}))
    denied = report_progress(kubeconfig, namespace, "other")
    assert denied is not None and denied.startswith("403"), denied
    assert "only the pods the operator created for DistributedTraining other may report its progress" in denied, denied
