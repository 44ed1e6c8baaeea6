"""kubetrain.client as a notebook uses it, against the real API server and operator: a job created from Python,
followed to Succeeded with a callback per change and its epochs kept as history; a new client that never waited reads
every epoch of a finished job from its status; a job made to fail raises JobFailed with the status's reason; get, list
and delete; a job the API server would refuse never reaches it.

The client reads a kubeconfig whose current context is the test's namespace, as a user's would. Progress is reported
as rank 0 reports it: its history.json (trainlib.history) and its reporter's patch (trainlib.progress)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kubetrain.client import Client, InvalidJob, Job, JobFailed, JobNotFound
from tests.support.cluster import ControlPlane, KubectlError, wait_until
from tests.support.operator_harness import OperatorProcess, status, wait_for_pods, wait_for_status, wait_gone
from trainlib.history import HistoryLog
from trainlib.progress import ProgressReporter

pytestmark = pytest.mark.controlplane

LIFECYCLE = ("Pending", "Starting", "Running")
WAIT_SECONDS = 300.0
CPU_ONLY = {"resources": {"gpusPerWorker": 0}}


@pytest.fixture
def client(control_plane: ControlPlane, namespace: str, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Client:
    """A client of a user whose kubeconfig's current context is this test's namespace."""
    monkeypatch.setenv("KUBECONFIG", str(control_plane.user_kubeconfig(namespace, tmp_path)))
    made = Client()
    assert made.namespace == namespace, "the namespace of the kubeconfig's current context"
    return made


def report_epoch(plane: ControlPlane, namespace: str, name: str, history: HistoryLog, epoch: int, loss: float,
                 epochs: int = 2) -> None:
    """Rank 0's end of `epoch`: its record in history.json, then its progress report, which carries that history."""

    def patch(namespace: str, name: str, body: dict) -> None:
        plane.kubectl("patch", "distributedtraining", name, "--namespace", namespace, "--subresource=status",
                      "--type=merge", f"--patch={json.dumps(body)}")

    history.append(epoch, {"loss": loss})
    reporter = ProgressReporter(namespace, name, patch, headline="loss")
    assert reporter.report(epoch=epoch, epochs=epochs, step=epoch * 10, metrics={"loss": loss},
                           history=history.records, now=datetime.now(timezone.utc))
    wait_until(lambda: (status(plane, namespace, name).get("progress") or {}).get("epoch") == epoch,
               60, message=f"{namespace}/{name} at epoch {epoch}")


@contextlib.contextmanager
def in_background(work: Callable[[], None]) -> Iterator[None]:
    """Runs `work` in a thread while the test waits; its exception is raised afterwards."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as failure:  # noqa: B036 - handed to the test's thread
            failures.append(failure)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    thread.join(WAIT_SECONDS)
    if failures:
        raise failures[0]


def finish_launcher(plane: ControlPlane, namespace: str, name: str, operator: OperatorProcess, phase: str,
                    exit_code: int, epochs: int = 0, checkpoints: Path | None = None) -> Callable[[], None]:
    """Once the job is Running, rank 0 reports `epochs` epochs (history.json in `checkpoints`), then the launcher pod
    ends with `phase`."""

    def work() -> None:
        wait_for_status(plane, namespace, name, operator, phase="Running", timeout=180)
        launcher = wait_for_pods(plane, namespace, name, 1, role="launcher", timeout=180)[0]
        if epochs:
            assert checkpoints is not None, "rank 0 keeps its history.json next to the checkpoints"
            history = HistoryLog(str(checkpoints), name, plot_interval=3600.0)
            for epoch in range(1, epochs + 1):
                report_epoch(plane, namespace, name, history, epoch, loss=1.0 / epoch)
        plane.set_pod_outcome(namespace, launcher["metadata"]["name"], phase, exit_code=exit_code)

    return work


def assert_phase_order(seen: list[Job], end: str) -> None:
    phases = [job.phase for job in seen]
    assert phases[-1] == end and phases.count(end) == 1, phases
    assert "Running" in phases, phases
    order = [LIFECYCLE.index(phase) for phase in phases[:-1]]
    assert order == sorted(order), phases


def test_a_job_created_from_python_is_followed_to_succeeded_with_its_history(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, client: Client, tmp_path: Path
) -> None:
    created = client.create(name="notebook", image="kubetrain/mnist:0.1.0", command=["python", "-m", "mnist"],
                            workers=2, **CPU_ONLY)
    assert (created.name, created.namespace, created.phase) == ("notebook", namespace, "Pending")
    seen: list[Job] = []
    with in_background(finish_launcher(control_plane, namespace, "notebook", operator, "Succeeded", 0, epochs=2,
                                       checkpoints=tmp_path / "checkpoints")):
        final = client.wait("notebook", timeout=WAIT_SECONDS, on_change=seen.append)
    assert (final.phase, final.reason) == ("Succeeded", "LauncherSucceeded"), final
    assert final == seen[-1]
    assert_phase_order(seen, "Succeeded")
    assert [job.epoch for job in seen if job.epoch] == sorted(job.epoch for job in seen if job.epoch)
    assert {1, 2} <= {job.epoch for job in seen}, "on_change saw each epoch rank 0 reported"
    assert client.history("notebook") == [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}]


def test_a_new_client_reads_every_epoch_of_a_finished_job_from_its_status_a_resumed_runs_earlier_ones_too(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, client: Client, tmp_path: Path
) -> None:
    """A notebook's new kernel, after the job ended: nothing watched it, yet history() has the whole curve."""
    client.create(name="curve", image="kubetrain/mnist:0.1.0", command=["python", "-m", "mnist"], workers=1,
                  **CPU_ONLY)
    wait_for_status(control_plane, namespace, "curve", operator, phase="Running", timeout=180)
    launcher = wait_for_pods(control_plane, namespace, "curve", 1, role="launcher", timeout=180)[0]
    checkpoints = str(tmp_path / "checkpoints")
    first = HistoryLog(checkpoints, "curve", plot_interval=3600.0)
    for epoch in (1, 2, 3):
        report_epoch(control_plane, namespace, "curve", first, epoch, loss=1.0 / epoch, epochs=4)
    resumed = HistoryLog(checkpoints, "curve", plot_interval=3600.0)  # rank 0 restarted
    resumed.resume_at(2)  # from the checkpoint of epoch 2: epoch 3 is trained again
    for epoch, loss in ((3, 0.3), (4, 0.2)):
        report_epoch(control_plane, namespace, "curve", resumed, epoch, loss=loss, epochs=4)
    control_plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded", exit_code=0)
    ended = wait_for_status(control_plane, namespace, "curve", operator, phase="Succeeded")
    assert ended["progress"]["summary"] == "4/4", "the operator's own status writes keep rank 0's history"

    rows = [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}, {"epoch": 3, "loss": 0.3}, {"epoch": 4, "loss": 0.2}]
    assert Client().history("curve") == rows
    frame = Client().history("curve", as_frame=True)
    assert list(frame.index) == [1, 2, 3, 4] and frame["loss"].tolist() == [row["loss"] for row in rows]


def test_a_job_made_to_fail_raises_job_failed_with_the_reason(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, client: Client
) -> None:
    client.create({"metadata": {"name": "broken"},
                   "spec": {"image": "kubetrain/mnist:0.1.0", "command": ["python", "-m", "mnist"], "workers": 2,
                            "runPolicy": {"backoffLimit": 0}, **CPU_ONLY}})
    seen: list[Job] = []
    with in_background(finish_launcher(control_plane, namespace, "broken", operator, "Failed", 1)):
        with pytest.raises(JobFailed) as failed:
            client.wait("broken", timeout=WAIT_SECONDS, on_change=seen.append)
    assert failed.value.reason == "LauncherFailed", str(failed.value)
    assert failed.value.message and str(failed.value).startswith(f"{namespace}/broken Failed: LauncherFailed: ")
    assert_phase_order(seen, "Failed")


def test_get_list_and_delete(crd: ControlPlane, namespace: str, client: Client) -> None:
    for name in ("b-job", "a-job"):
        client.create(name=name, image="kubetrain/mnist:0.1.0", command=["python", "-m", "mnist"], workers=1,
                      **CPU_ONLY)
    assert [job.name for job in client.list()] == ["a-job", "b-job"]
    assert client.get("a-job").namespace == namespace
    client.delete("a-job")
    wait_gone(crd, "distributedtraining", "a-job", namespace)
    with pytest.raises(JobNotFound, match=f"DistributedTraining {namespace}/a-job not found"):
        client.get("a-job")
    with pytest.raises(JobNotFound):
        client.delete("a-job")
    assert [job.name for job in client.list()] == ["b-job"]


def test_an_invalid_job_is_refused_before_the_api_server_sees_it(
    crd: ControlPlane, namespace: str, client: Client
) -> None:
    with pytest.raises(InvalidJob) as refused:
        client.create(name="bad", image="kubetrain/mnist:0.1.0", command=["python", "-m", "mnist"], workers=2,
                      slots_per_worker=4, resources={"gpusPerWorker": 1})
    assert refused.value.field == "spec.slotsPerWorker", str(refused.value)
    with pytest.raises(KubectlError, match="NotFound"):
        crd.get("distributedtraining", "bad", namespace)
