"""`kubetrain tensorboard NAME` as a user runs it: which pod it forwards to, the one-line errors, and the forward
itself. The job and its pods are the builders' own, as the API server would return them; kubectl is a stand-in that
says what kubectl says and serves the port it was given (a real port-forward needs a kubelet: the kind tier)."""

from __future__ import annotations

import json
import signal
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from dtr_bodies import training

from kubetrain import kube, tensorboard_forward
from kubetrain.api import parse_job
from kubetrain.cli import main
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.tensorboard_target import NoTensorBoard, Target, find_target, port_forward_command
from tests.support.offline_kubeconfig import use_offline_kubeconfig

ON = {"enabled": True}


def job_body(phase: str = "Running", attempt: int = 1, **spec: Any) -> dict[str, Any]:
    body = training(tensorboard=ON, **spec)
    body["status"] = {"phase": phase, "attempt": attempt}
    return body


def running(pod: dict[str, Any], tensorboard: str = "running") -> dict[str, Any]:
    state = {"running": {}} if tensorboard == "running" else {"waiting": {"reason": tensorboard}}
    return {**pod, "status": {"phase": "Running", "initContainerStatuses": [
        {"name": "kubetrain-entrypoints", "state": {"terminated": {"exitCode": 0}}},
        {"name": "tensorboard", "state": state}]}}


def worker_pods(body: dict[str, Any], attempt: int) -> list[dict[str, Any]]:
    job = parse_job(body)
    return [running(build_worker_pod(job, index, attempt)) for index in range(job.spec.workers)]


def launcher_pod(body: dict[str, Any], attempt: int) -> dict[str, Any]:
    template = build_launcher_job(parse_job(body), attempt)["spec"]["template"]
    return running({"metadata": {**template["metadata"], "name": f"cifar-launcher-{attempt}abcd"},
                    "spec": template["spec"]})


def test_it_forwards_to_worker_0_of_the_current_attempt() -> None:
    body = job_body(attempt=2)
    pods = [*worker_pods(body, 1), *worker_pods(body, 2)]
    pods[2]["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"  # attempt 2's worker-0, going away
    with pytest.raises(NoTensorBoard):
        find_target(body, pods)
    assert find_target(body, worker_pods(body, 1) + worker_pods(body, 2)) == Target("ml", "cifar-worker-0", 8006)


def test_it_forwards_to_the_launcher_when_the_launcher_runs_rank_0() -> None:
    body = job_body(attempt=0, launcher={"runAsWorker": True})
    pods = [*worker_pods(body, 0), launcher_pod(body, 0)]
    assert find_target(body, pods) == Target("ml", "cifar-launcher-0abcd", 8006)


@pytest.mark.parametrize(("body", "pods", "words"), [
    (training(), [], "DistributedTraining ml/cifar has no TensorBoard: spec.tensorboard.enabled is false; it "
                     "cannot change on a job, so create the job again with spec.tensorboard: {enabled: true}"),
    (job_body("Pending"), [], "DistributedTraining ml/cifar has no pod for rank 0 yet (phase Pending): try again "
                              "once it is Running (kubetrain status cifar)"),
    (job_body("Succeeded"), [], "DistributedTraining ml/cifar is Succeeded and its pods are gone, TensorBoard "
                                "with them; its event files stay in the job's folder of the checkpoint volume"),
    (job_body("Starting"), [{**worker_pods(job_body(), 1)[0], "status": {"phase": "Pending"}}],
     "DistributedTraining ml/cifar: pod cifar-worker-0, where TensorBoard runs, is Pending: try again once it is "
     "Running (kubetrain status cifar)"),
    (job_body(), [running(worker_pods(job_body(), 1)[0], tensorboard="CrashLoopBackOff")],
     "DistributedTraining ml/cifar: the tensorboard container of pod cifar-worker-0 is not running "
     "(CrashLoopBackOff); its log says why: kubectl logs cifar-worker-0 --namespace ml --container tensorboard"),
], ids=["off", "no pod yet", "finished", "pod pending", "container waiting"])
def test_why_there_is_nothing_to_forward_is_one_line(body: dict[str, Any], pods: list[dict[str, Any]],
                                                     words: str) -> None:
    with pytest.raises(NoTensorBoard) as raised:
        find_target(body, pods)
    assert str(raised.value) == words


def test_kubectl_forwards_the_loopback_port_to_the_pods_tensorboard_port() -> None:
    assert port_forward_command("/usr/bin/kubectl", Target("ml", "cifar-worker-0", 8006), 7007) == [
        "/usr/bin/kubectl", "port-forward", "--namespace", "ml", "--address", "127.0.0.1", "pod/cifar-worker-0",
        "7007:8006"]


# -- the command ----------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig whose current context's namespace is ml (nothing listens at its server)."""
    use_offline_kubeconfig(tmp_path, monkeypatch, "ml")


class Cluster:
    """Stands for the API server: the job `body` (None: no such job) and its `pods`; records what was asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any] | None,
                 pods: list[dict[str, Any]]) -> None:
        self.asked: list[tuple[str, str]] = []
        monkeypatch.setattr(kube, "list_training", lambda cluster, namespace, name: (
            self.asked.append((namespace, name)), (body, "1"))[1])
        monkeypatch.setattr(kube, "list_job_pods", lambda cluster, namespace, name: pods)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_no_such_job_is_one_line_in_the_contexts_namespace(monkeypatch, capsys) -> None:
    cluster = Cluster(monkeypatch, None, [])
    assert main(["tensorboard", "cifar"]) == 2
    assert one_error_line(capsys) == "kubetrain: error: DistributedTraining ml/cifar not found"
    assert cluster.asked == [("ml", "cifar")]
    main(["tensorboard", "cifar", "-n", "team-b"])
    assert cluster.asked[-1] == ("team-b", "cifar")


def test_a_job_without_tensorboard_names_the_field(monkeypatch, capsys) -> None:
    Cluster(monkeypatch, training(), [])
    assert main(["tensorboard", "cifar"]) == 2
    assert "spec.tensorboard.enabled is false" in one_error_line(capsys)


def test_no_kubectl_on_path_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    body = job_body()
    Cluster(monkeypatch, body, worker_pods(body, 1))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["tensorboard", "cifar"]) == 2
    assert one_error_line(capsys) == ("kubetrain: error: kubetrain tensorboard forwards the port with kubectl, and "
                                      "there is no kubectl on PATH: install kubectl, or run `kubectl port-forward` "
                                      "yourself")


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_a_port_that_is_no_port_is_a_usage_error(port: str, capsys) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["tensorboard", "cifar", "--port", port])
    assert raised.value.code == 2 and "--port" in capsys.readouterr().err


STAND_IN = """\
#!{python}
# Stands for kubectl port-forward: records its arguments, says what kubectl says, serves the local port.
import http.server, json, sys, time
open({record!r}, "w").write(json.dumps(sys.argv[1:]))
if {mode!r} == "fail":
    print("error: unable to forward port because pod is not running. Current status=Pending", file=sys.stderr)
    sys.exit(1)
local = int(sys.argv[-1].split(":")[0])
if {mode!r} == "refused":  # kubectl since 1.23 ends when the pod refuses a forwarded connection
    print(f"Forwarding from 127.0.0.1:{{local}} -> 8006", flush=True)
    print("E1127 portforward.go:413] an error occurred forwarding: connection refused", file=sys.stderr)
    print("error: lost connection to pod", file=sys.stderr)
    sys.exit(1)
if {mode!r} == "serve":
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", local), Quiet)
    print(f"Forwarding from 127.0.0.1:{{local}} -> 8006", flush=True)
    server.serve_forever()
print(f"Forwarding from 127.0.0.1:{{local}} -> 8006", flush=True)
time.sleep(3)  # "silent": the pod's TensorBoard never answers, then the pod goes
"""


def stand_in_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = "serve") -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    record = tmp_path / "kubectl-args.json"
    script = folder / "kubectl"
    script.write_text(textwrap.dedent(STAND_IN).format(python=sys.executable, record=str(record), mode=mode))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.chdir(tmp_path)
    return record


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_it_prints_the_url_and_forwards_until_ctrl_c(monkeypatch, capsys, tmp_path) -> None:
    body = job_body()
    Cluster(monkeypatch, body, worker_pods(body, 1))
    record = stand_in_kubectl(tmp_path, monkeypatch)
    port = free_port()

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(5)  # Ctrl-C, a few seconds after it forwards
    try:
        code = main(["tensorboard", "cifar", "--port", str(port)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out = capsys.readouterr()
    assert code == 130
    assert out.out == f"TensorBoard of ml/cifar (pod cifar-worker-0): http://127.0.0.1:{port}/  (Ctrl-C stops)\n"
    assert out.err == ""
    assert json.loads(record.read_text()) == ["port-forward", "--namespace", "ml", "--address", "127.0.0.1",
                                              "pod/cifar-worker-0", f"{port}:8006"]
    with pytest.raises(OSError):  # the forward ended with the command
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_kubectl_that_cannot_forward_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    body = job_body()
    Cluster(monkeypatch, body, worker_pods(body, 1))
    stand_in_kubectl(tmp_path, monkeypatch, mode="fail")
    assert main(["tensorboard", "cifar"]) == 2
    assert one_error_line(capsys) == ("kubetrain: error: kubectl port-forward to pod cifar-worker-0: error: unable to "
                                      "forward port because pod is not running. Current status=Pending")


def test_a_tensorboard_that_does_not_answer_is_a_warning_naming_its_log(monkeypatch, capsys, tmp_path) -> None:
    body = job_body()
    Cluster(monkeypatch, body, worker_pods(body, 1))
    stand_in_kubectl(tmp_path, monkeypatch, mode="silent")
    monkeypatch.setattr(tensorboard_forward, "ANSWER_SECONDS", 1.0)
    port = free_port()
    assert main(["tensorboard", "cifar", "--port", str(port)]) == 2
    out = capsys.readouterr()
    assert out.out == f"TensorBoard of ml/cifar (pod cifar-worker-0): http://127.0.0.1:{port}/  (Ctrl-C stops)\n"
    assert out.err.splitlines() == [
        "kubetrain: warning: TensorBoard does not answer yet; its log says why: kubectl logs cifar-worker-0 "
        "--namespace ml --container tensorboard",
        "kubetrain: error: kubectl port-forward to pod cifar-worker-0 ended (exit 0): is the pod gone? (kubetrain "
        "status cifar)"]


def test_a_tensorboard_that_refuses_the_connection_is_one_line_naming_its_log(monkeypatch, capsys, tmp_path) -> None:
    body = job_body()
    Cluster(monkeypatch, body, worker_pods(body, 1))
    stand_in_kubectl(tmp_path, monkeypatch, mode="refused")
    assert main(["tensorboard", "cifar", "--port", str(free_port())]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        "kubetrain: error: TensorBoard in pod cifar-worker-0 does not answer on its port 8006; its log says why: "
        "kubectl logs cifar-worker-0 --namespace ml --container tensorboard"]
