"""spec.tensorboard: the TensorBoard container a user finds in the pod where rank 0 runs (and nowhere else), what it
reads and how it is locked down, the spec rules that name the field, and the container's own script run for real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from dtr_bodies import training

from kubetrain.api import SpecError, parse_job
from kubetrain.cli import child_objects
from kubetrain.keys import generate_job_keys
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.names import rank_hostnames
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.schema import unknown_fields
from kubetrain.validation import defaulted, violations

ON = {"enabled": True}


def pods(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every pod spec of the job by pod name (the launcher's under its Job's name)."""
    job = parse_job(body)
    found = {f"cifar-worker-{index}": build_worker_pod(job, index)["spec"] for index in range(job.spec.workers)}
    found["cifar-launcher"] = build_launcher_job(job)["spec"]["template"]["spec"]
    return found


def with_tensorboard(body: dict[str, Any]) -> list[str]:
    return sorted(name for name, spec in pods(body).items()
                  if any(c["name"] == "tensorboard" for c in spec.get("initContainers", [])))


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, []),
    ({"tensorboard": {"enabled": False}}, []),
    ({"tensorboard": ON}, ["cifar-worker-0"]),
    ({"tensorboard": ON, "workers": 3, "resources": {}}, ["cifar-worker-0"]),
    ({"tensorboard": ON, "launcher": {"runAsWorker": True}}, ["cifar-launcher"]),
    ({"tensorboard": ON, "workers": 0, "launcher": {"runAsWorker": True}}, ["cifar-launcher"]),
    ({"tensorboard": ON, "workers": 2, "resources": {}, "elastic": {"maxWorkers": 3}}, ["cifar-worker-0"]),
])
def test_tensorboard_runs_only_in_the_pod_of_rank_0(spec: dict[str, Any], expected: list[str]) -> None:
    body = training(**spec)
    assert with_tensorboard(body) == expected
    if expected:  # rank 0 is the first host of the hostfile
        assert rank_hostnames(parse_job(body))[0].split(".")[0] == expected[0]


def tensorboard_of(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = pods(body)[with_tensorboard(body)[0]]
    return next(c for c in spec["initContainers"] if c["name"] == "tensorboard"), spec


def test_it_serves_the_jobs_folder_read_only_from_the_jobs_image_on_a_named_port() -> None:
    container, spec = tensorboard_of(training(tensorboard=ON, imagePullPolicy="IfNotPresent"))
    assert container["image"] == "kubetrain/cifar-mixup:0.1.0" and container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert container["command"][4:] == ["/checkpoints/ml/cifar", "8006", "kubetrain/cifar-mixup:0.1.0"]
    assert container["ports"] == [{"name": "tensorboard", "containerPort": 8006, "protocol": "TCP"}]
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert mounts["checkpoint"] == {"name": "checkpoint", "mountPath": "/checkpoints", "readOnly": True}
    assert mounts["tensorboard-tmp"]["mountPath"] == "/tmp"
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == "checkpoints"
    assert "emptyDir" in volumes["tensorboard-tmp"]
    worker = spec["containers"][0]
    assert {"name": "checkpoint", "mountPath": "/checkpoints"} in worker["volumeMounts"], "rank 0 still writes"


@pytest.mark.parametrize("uid", [1000, 0])
def test_it_runs_under_the_restricted_pod_security_whatever_the_jobs_uid(uid: int) -> None:
    container, spec = tensorboard_of(training(tensorboard=ON, runAsUser=uid))
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert spec["securityContext"]["runAsUser"] == uid and spec["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"}


def test_it_is_a_sidecar_with_small_resources_after_the_entrypoints() -> None:
    """A restartable init container starts before the main container and stops after it, so the launcher's Job
    completes when the launcher does."""
    container, spec = tensorboard_of(training(tensorboard=ON, launcher={"runAsWorker": True}))
    assert [c["name"] for c in spec["initContainers"]] == ["kubetrain-entrypoints", "tensorboard"]
    assert container["restartPolicy"] == "Always"
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}


def test_render_shows_it() -> None:
    objects = child_objects(parse_job(training(tensorboard=ON)), generate_job_keys())
    shown = {o["metadata"]["name"]: [c["name"] for c in o["spec"].get("initContainers", [])]
             for o in objects if o["kind"] == "Pod"}
    assert shown == {"cifar-worker-0": ["kubetrain-entrypoints", "tensorboard"],
                     "cifar-worker-1": ["kubetrain-entrypoints"]}


def refused(**spec: Any) -> list[tuple[str, str]]:
    return [(v.field, v.message) for v in violations(defaulted(training(**spec)))]


def test_it_is_off_by_default_and_parsed() -> None:
    assert defaulted(training())["spec"]["tensorboard"] == {"enabled": False}
    assert parse_job(training()).spec.tensorboard is False
    assert parse_job(training(tensorboard=ON)).spec.tensorboard is True


@pytest.mark.parametrize(("tensorboard", "field", "words"), [
    ({"enabled": "yes"}, "spec.tensorboard.enabled",
     'Invalid value: "string": spec.tensorboard.enabled in body must be of type boolean'),
    (True, "spec.tensorboard", 'Invalid value: "boolean": spec.tensorboard in body must be of type object'),
])
def test_a_bad_value_is_refused_naming_the_field(tensorboard: Any, field: str, words: str) -> None:
    found = refused(tensorboard=tensorboard)
    assert any(where == field and words in said for where, said in found), found


def test_an_unknown_field_is_named_with_the_ones_it_has() -> None:
    assert unknown_fields(training(tensorboard={"enabled": True, "port": 7007})) == [
        "spec.tensorboard.port: unknown field, the API server refuses it; known here: enabled"]


def test_a_template_container_cannot_take_its_name() -> None:
    sidecar = {"name": "tensorboard", "image": "registry.example.com/tb:1"}
    with pytest.raises(SpecError) as raised:
        parse_job(training(tensorboard=ON, podTemplate={"spec": {"containers": [sidecar]}}))
    assert raised.value.field == "spec.podTemplate.spec.containers[0].name"
    assert "kubetrain's TensorBoard container" in raised.value.message
    assert parse_job(training(podTemplate={"spec": {"containers": [sidecar]}})).spec.tensorboard is False


# -- the container's script, run here with /bin/sh as the pod runs it ----------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def script_command(folder: Path, port: int) -> list[str]:
    container, _ = tensorboard_of(training(tensorboard=ON))
    return [*container["command"][:4], str(folder), str(port), "registry.example.com/own:1"]


def test_an_image_without_tensorboard_says_so_in_one_line_and_stays_up(tmp_path: Path) -> None:
    """A container that exited would restart, and keep its pod (and with it the training) from being Ready."""
    process = subprocess.Popen(script_command(tmp_path, free_port()), env={"PATH": "/usr/bin:/bin"},
                               stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        assert process.poll() is None, "the container ended"
    finally:
        process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert stderr.splitlines() == [
        "kubetrain: error: image registry.example.com/own:1 has no tensorboard command: install it in the image (pip "
        "install tensorboard; kubetrain's images have it), or set spec.tensorboard.enabled: false"]


def test_with_tensorboard_it_serves_the_event_files_rank_0_wrote(tmp_path: Path) -> None:
    """The job's folder holds <run>/tensorboard as trainlib writes it; TensorBoard's HTTP API lists its scalars."""
    tensorflow = pytest.importorskip("tensorflow")
    from trainlib.tensorboard import TensorBoardLog

    log = TensorBoardLog(str(tmp_path), every_steps=0)
    log.epoch(1, {"loss": 0.5})
    log.close()
    assert shutil.which("tensorboard", path=os.path.dirname(sys.executable)), tensorflow.__version__
    port = free_port()
    env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(tmp_path)}
    process = subprocess.Popen(script_command(tmp_path, port), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline, tags = time.monotonic() + 120, None
        while tags is None and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as answer:
                    tags = json.loads(answer.read())
            except OSError:
                time.sleep(1)
        assert tags is not None and list(tags) == ["tensorboard"] and list(tags["tensorboard"]) == ["epoch/loss"]
    finally:
        process.terminate()
        process.wait(timeout=30)
