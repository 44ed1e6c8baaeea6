"""Rank 0 of a real training run reports progress into the job's status with its pod's ServiceAccount token, which the
chart's admission policy lets write this job's progress only; its last epochs go with every report, bounded by the
CRD; a job re-created under the same name says which checkpoint it resumed and which job wrote it, its history
starting with the epochs before, or starts fresh when its spec says so."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.chart import patch_status, progress_access, report_progress, token_kubeconfig
from tests.support.cluster import ControlPlane, KubectlError, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    events,
    install_crd,
    operator_watching,
    training,
    wait_for_pods,
    wait_gone,
)
from trainlib.status_payload import HISTORY_EPOCHS, build_status_patch


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
        "KUBETRAIN_ATTEMPT": "0", "TF_CPP_MIN_LOG_LEVEL": "2",
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

    # the startup timeline, from the job's creation to the first step rank 0 reported
    startup = wait_until(lambda: (s := control_plane.get("dtr", "digits", namespace)["status"]["startup"])
                         .get("waitingFor") is None and s, message="the operator to end the startup timeline")
    phases = startup["phases"]
    assert [p["name"] for p in phases] == ["Created", "Scheduled", "ContainersStarted", "WorkersReady",
                                           "LauncherStarted", "WorldUp", "FirstStep"], startup
    assert startup["attempt"] == 0 and startup["seconds"] == pytest.approx(sum(p["seconds"] for p in phases), abs=0.5)
    reached = [datetime.fromisoformat(p["at"].replace("Z", "+00:00")) for p in phases]
    assert reached[-1] > reached[-2] and reached[-1] < datetime.now(timezone.utc), startup  # rank 0's own times

    shown = subprocess.run([str(Path(sys.executable).parent / "kubetrain"), "status", "digits", "-n", namespace],
                           env=control_plane.env(), capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "epoch 2/2" in shown.stdout and f"checkpoint: {status['checkpoint']['path']}" in shown.stdout
    assert f"startup:    attempt 0 ({startup['seconds']:g} s): Created, Scheduled +" in shown.stdout, shown.stdout
    assert "FirstStep +" in shown.stdout and "waiting:" not in shown.stdout, shown.stdout

    # the token is good for this job's status only
    create(control_plane, namespace, training("other", workers=1, resources={"gpusPerWorker": 0}))
    denied = report_progress(kubeconfig, namespace, "other")
    assert denied is not None and denied.startswith("403"), denied
    assert "only the pods the operator created for DistributedTraining other may report its progress" in denied, denied


def train_as_rank_zero(plane: ControlPlane, namespace: str, job: str, data: Path, checkpoints: Path, home: Path,
                       epochs: int) -> subprocess.CompletedProcess[str]:
    """cifar_mixup as rank 0 of `job`'s worker 0 runs it: the pod's environment contract (the operator's own
    builders) and a token bound to that pod; `checkpoints` stands for the checkpoint claim."""
    from kubetrain.api import parse_job
    from kubetrain.manifests.env import job_environment

    body = plane.get("dtr", job, namespace)
    contract = job_environment(parse_job(body, admitted=True))
    kubeconfig = token_kubeconfig(plane, namespace, "default", home / f"{job}-{body['metadata']['uid']}.kubeconfig",
                                  pod=f"{job}-worker-0")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(kubeconfig), "TF_CPP_MIN_LOG_LEVEL": "2",
           **{key: os.environ[key] for key in ("PYTHONPATH",) if key in os.environ},  # the code under test
           **{key: contract[key] for key in ("KUBETRAIN_REPORT_STATUS", "KUBETRAIN_NAMESPACE", "KUBETRAIN_JOB_NAME",
                                             "KUBETRAIN_JOB_UID", "KUBETRAIN_CHECKPOINT_RESUME")}}
    run = subprocess.run(
        [sys.executable, "-m", "cifar_mixup", "--data-dir", str(data), "--checkpoint-dir", str(checkpoints),
         "--epochs", str(epochs), "--batch-size", "64", "--seed", "1"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "could not report" not in run.stderr + run.stdout, "every status patch went through"
    return run


def recreate(plane: ControlPlane, namespace: str, body: dict) -> str:
    """Delete the job (if any) and create it again under the same name; returns the new uid."""
    name = body["metadata"]["name"]
    plane.kubectl("delete", "dtr", name, "--namespace", namespace, "--ignore-not-found", "--wait=false")
    wait_gone(plane, "dtr", name, namespace)
    create(plane, namespace, body)
    uid = str(plane.get("dtr", name, namespace)["metadata"]["uid"])

    def reporting() -> bool:  # the new job's worker 0 exists and the operator lists it as one that may report
        try:
            pod = plane.get("pod", f"{name}-worker-0", namespace)
        except KubectlError:
            return False
        owners = {ref["uid"] for ref in pod["metadata"].get("ownerReferences") or []}
        listed = plane.get("dtr", name, namespace).get("status", {}).get("podUIDs") or []
        return uid in owners and pod["metadata"]["uid"] in listed

    wait_until(reporting, message=f"the operator to list the worker of the new {name}")
    return uid


def test_rank_zero_reports_its_last_epochs_and_still_nothing_but_progress_and_checkpoint(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    recreate(control_plane, namespace, training("long", workers=1, resources={"gpusPerWorker": 0}))
    kubeconfig = token_kubeconfig(control_plane, namespace, "default", tmp_path / "job.kubeconfig",
                                  pod="long-worker-0")
    epoch = HISTORY_EPOCHS + 50
    records = [{"epoch": done, "loss": 1.0 / done} for done in range(1, epoch)]  # history.json's
    body = build_status_patch(epoch=epoch, epochs=epoch, step=epoch * 10, metrics={"loss": 1.0 / epoch},
                              updated_at=datetime.now(timezone.utc), headline="loss", history=records)
    assert patch_status(kubeconfig, namespace, "long", body) is None, "rank 0's report with its history"
    status = wait_until(lambda: (s := control_plane.get("dtr", "long", namespace)["status"])["progress"].get(
        "summary") == f"{epoch}/{epoch}" and s, message="the operator to write the progress summary")
    history = status["progress"]["history"]
    assert [entry["epoch"] for entry in history] == list(range(51, epoch + 1)), "the last epochs, after the operator's"
    assert history[-1]["metrics"] == {"loss": 1.0 / epoch}

    longer = {"status": {"progress": {"history": [{"epoch": 1, "metrics": {}}] * (HISTORY_EPOCHS + 1)}}}
    refused = patch_status(kubeconfig, namespace, "long", longer)
    assert refused is not None and f"must have at most {HISTORY_EPOCHS} items" in refused, refused
    body["status"]["restarts"] = 9  # the operator counts restarts
    refused = patch_status(kubeconfig, namespace, "long", body)
    assert refused is not None and refused.startswith("403"), refused
    assert "may report only status.progress and status.checkpoint; refused: status.restarts" in refused, refused


def test_a_job_re_created_under_its_name_says_whose_checkpoint_it_resumed_or_starts_fresh(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    data, checkpoints = tmp_path / "data", tmp_path / "checkpoints"
    subprocess.run([sys.executable, "-m", "cifar_mixup.convert", "digits", "--out", str(data)], check=True,
                   capture_output=True, timeout=300)
    body = training("again", workers=1, resources={"gpusPerWorker": 0})
    first = recreate(control_plane, namespace, body)
    train_as_rank_zero(control_plane, namespace, "again", data, checkpoints, tmp_path, epochs=1)
    reported = control_plane.get("dtr", "again", namespace)["status"]
    written = reported["checkpoint"]
    assert written["epoch"] == 1 and written.get("resumedFrom") is None

    second = recreate(control_plane, namespace, body)  # the default, spec.checkpoint.resume: Always
    train_as_rank_zero(control_plane, namespace, "again", data, checkpoints, tmp_path, epochs=2)

    def restored() -> dict | None:
        status = control_plane.get("dtr", "again", namespace)["status"]
        return next((c for c in status.get("conditions") or [] if c["type"] == "CheckpointRestored"), None)

    condition = wait_until(restored, message="the CheckpointRestored condition")
    status = control_plane.get("dtr", "again", namespace)["status"]
    resumed = status["checkpoint"]["resumedFrom"]
    assert (resumed["path"], resumed["epoch"], resumed["jobUID"]) == (written["path"], 1, first)
    said = (f"resumed from epoch 1 of checkpoint {written['path']} written at {resumed['writtenAt']} by job uid "
            f"{first}, not this job (uid {second})")
    assert condition["reason"] == "ResumedFromAnotherJob" and condition["message"].startswith(said), condition
    announced = [e for e in events(control_plane, namespace, "again") if e["involvedObject"]["uid"] == second
                 and e["reason"] == "ResumedFromAnotherJob"]
    assert [(e["type"], e["message"]) for e in announced] == [("Warning", condition["message"])]
    assert status["progress"]["epoch"] == 2
    history = status["progress"]["history"]
    assert [entry["epoch"] for entry in history] == [1, 2], "the resumed run's history starts with the epoch before"
    assert history[0]["metrics"] == pytest.approx(reported["progress"]["metrics"]), "as the job before reported it"

    body["spec"]["checkpoint"] = {"resume": "SameJob"}
    recreate(control_plane, namespace, body)
    run = train_as_rank_zero(control_plane, namespace, "again", data, checkpoints, tmp_path, epochs=1)
    assert f"spec.checkpoint.resume is SameJob and another job (uid {second}) wrote it" in run.stderr + run.stdout
    status = control_plane.get("dtr", "again", namespace)["status"]
    assert status["checkpoint"]["epoch"] == 1 and status["checkpoint"].get("resumedFrom") is None
    assert [entry["epoch"] for entry in status["progress"]["history"]] == [1], "a fresh start has its own epoch only"
    folders = sorted(p.name for p in checkpoints.iterdir() if p.is_dir())  # the set-aside one and TensorBoard's
    assert len(folders) == 2 and folders[0].startswith("superseded-") and folders[1] == "tensorboard", folders
