"""`kubetrain logs` and `Client.logs` as a user runs them, against the real API server and operator: the commands
docs/logs.md shows, run as written on a job of that name, a job that does not exist, a launcher not started yet, an
attempt not kept, and an earlier attempt's kept copy printed whole or one rank's lines of it.

kwok runs no container: the API server cannot give a kwok pod's log, so here the current attempt's log and the copy
the operator makes of a failed one say so (and exit 2). A copy with output, as the operator makes it from a real log,
is put in its place to read one back; the kind tier reads real logs (tests/e2e/test_kind.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.api import parse_job
from kubetrain.client import Client, JobNotFound, LogsNotFound, NoRankTags
from kubetrain.contract import attempt_log_name
from kubetrain.manifests.attempt_log import Tail, build_attempt_log
from tests.support.cluster import ControlPlane, wait_until
from tests.support.documented import documented_commands
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    get_training,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli"]
NAME = "cifar-mixup"  # the job docs/logs.md shows
# docs/logs.md, run here as written
CURRENT = "kubetrain logs cifar-mixup"
FOLLOW = "kubetrain logs cifar-mixup -f"
EARLIER = "kubetrain logs cifar-mixup --attempt 0"
RANK = "kubetrain logs cifar-mixup --rank 1"
# Open MPI 4.1.4's `mpirun --tag-output` (tests/unit/operator/test_logs.py has where it comes from)
OPEN_MPI = "[1,0]<stdout>:hello from 0\n[1,0]<stderr>:oops 0\n[1,1]<stdout>:hello from 1\n[1,1]<stderr>:oops 1\n"


@pytest.fixture
def user_env(control_plane: ControlPlane, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> dict[str, str]:
    """The environment of a user whose kubeconfig's current context is this test's namespace (Client() reads it)."""
    path = control_plane.user_kubeconfig(namespace, tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(path))
    return {**os.environ, "KUBECONFIG": str(path)}


def documented(text: str) -> list[str]:
    """The words after `kubetrain` of a command docs/logs.md shows."""
    assert text in {command.text for command in documented_commands()}, f"no document shows `{text}` any more"
    return shlex.split(text)[1:]


def run(words: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run([*KUBETRAIN, *words], capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def one_error(err: str) -> str:
    """The one line an error is, without its `kubetrain: error: `."""
    assert err.startswith("kubetrain: error: ") and err.count("\n") == 1, err
    return err.removeprefix("kubetrain: error: ").rstrip("\n")


def test_the_documented_commands_say_in_one_line_what_kwok_cannot_show(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, user_env: dict[str, str]
) -> None:
    create(control_plane, namespace, training(NAME, resources={"gpusPerWorker": 64}))  # no node has that many
    wait_for_status(control_plane, namespace, NAME, operator, phase="Pending", reason="Unschedulable")
    code, out, err = run(documented(CURRENT), user_env)
    assert (code, out) == (2, ""), err
    assert one_error(err).startswith(f"no launcher pod of {namespace}/{NAME} (attempt 0) has started: the job is "
                                     "Pending (Unschedulable: worker pods cannot be scheduled: "), err

    control_plane.kubectl("delete", "distributedtraining", NAME, "--namespace", namespace, "--wait=true")
    create(control_plane, namespace, training(NAME, resources={"gpusPerWorker": 0}, runPolicy={"backoffLimit": 2}))
    wait_for_status(control_plane, namespace, NAME, operator, phase="Running", timeout=180)
    first = wait_for_pods(control_plane, namespace, NAME, 1, role="launcher", timeout=180)[0]["metadata"]["name"]
    for text in (CURRENT, RANK, FOLLOW):
        code, out, err = run(documented(text), user_env)
        assert (code, out) == (2, ""), (text, err)
        assert one_error(err).startswith(f"the launcher log of {namespace}/{NAME} (attempt 0, pod {first}) cannot be "
                                         "read: 404 Not Found: "), (text, err)

    control_plane.set_pod_outcome(namespace, first, "Failed", exit_code=1)
    wait_for_status(control_plane, namespace, NAME, operator, phase="Running", attempt=1, timeout=180)
    code, out, err = run(documented(EARLIER), user_env)
    assert (code, out) == (2, ""), err
    assert one_error(err).startswith(f"attempt 0 of {namespace}/{NAME} left no launcher output: the log of launcher "
                                     f"pod {first} could not be read: 404 Not Found: "), err
    code, out, err = run(["logs", NAME, "--attempt", "5"], user_env)
    assert (code, out) == (2, ""), err
    assert one_error(err).startswith(f"attempt 5 of {namespace}/{NAME} not found: the job is at attempt 1; the "
                                     "output of attempt(s) 0, 1 is kept"), err


def test_a_job_that_does_not_exist_is_named_by_the_command_and_the_client(
    crd: ControlPlane, namespace: str, user_env: dict[str, str]
) -> None:
    for words in (["logs", "nope"], ["logs", "nope", "-f"], ["logs", "nope", "--attempt", "1"]):
        code, out, err = run(words, user_env)
        assert (code, out, err) == (2, "", f"kubetrain: error: DistributedTraining {namespace}/nope not found\n")
    with pytest.raises(JobNotFound, match=f"^DistributedTraining {namespace}/nope not found$"):
        Client().logs("nope")
    with pytest.raises(JobNotFound):
        next(Client().logs("nope", follow=True))


def test_an_earlier_attempts_kept_output_is_printed_whole_or_one_ranks_lines(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, user_env: dict[str, str]
) -> None:
    name = "kept"
    create(control_plane, namespace, training(name, resources={"gpusPerWorker": 0}, runPolicy={"backoffLimit": 2}))
    wait_for_status(control_plane, namespace, name, operator, phase="Running", timeout=180)
    pod = wait_for_pods(control_plane, namespace, name, 1, role="launcher", timeout=180)[0]["metadata"]["name"]
    control_plane.set_pod_outcome(namespace, pod, "Failed", exit_code=1)
    wait_for_status(control_plane, namespace, name, operator, phase="Running", attempt=1, timeout=180)
    # kwok had no log to copy: the copy made from a real one takes the place of the operator's.
    copy = attempt_log_name(name, 0)
    wait_until(lambda: control_plane.exists("configmap", copy, namespace), 60, message=copy)
    control_plane.kubectl("delete", "configmap", copy, "--namespace", namespace)
    job = parse_job(get_training(control_plane, namespace, name))
    note = "the start of the launcher's log was cut: this copy keeps its last 512 KiB (5000 lines)"
    control_plane.apply(json.dumps(build_attempt_log(job, 0, pod, Tail(OPEN_MPI, note))))

    code, out, err = run(["logs", name, "--attempt", "0"], user_env)
    assert (code, out, err) == (0, OPEN_MPI, f"kubetrain: attempt 0's kept copy: {note}\n")
    code, out, _ = run(["logs", name, "--attempt", "0", "--rank", "1"], user_env)
    assert (code, out) == (0, "[1,1]<stdout>:hello from 1\n[1,1]<stderr>:oops 1\n")
    client = Client()
    assert client.logs(name, attempt=0) == OPEN_MPI
    assert client.logs(name, attempt=0, rank=0) == "[1,0]<stdout>:hello from 0\n[1,0]<stderr>:oops 0\n"
    with pytest.raises(LogsNotFound, match=f"^attempt 3 of {namespace}/{name} not found: the job is at attempt 1"):
        client.logs(name, attempt=3)

    control_plane.kubectl("delete", "configmap", copy, "--namespace", namespace)
    control_plane.apply(json.dumps(build_attempt_log(job, 0, pod, Tail("hello from 0\nhello from 1\n"))))
    code, out, err = run(["logs", name, "--attempt", "0", "--rank", "1"], user_env)
    assert (code, out) == (2, "")
    assert one_error(err).startswith(f"--rank cannot filter attempt 0 of {namespace}/{name}: no line of its "
                                     "launcher output starts with a rank tag"), err
    with pytest.raises(NoRankTags):
        client.logs(name, attempt=0, rank=1)
