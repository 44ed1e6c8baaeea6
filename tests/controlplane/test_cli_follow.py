"""`kubetrain status --watch` and `kubetrain wait` as a user runs them, against the real API server and operator: a job
followed from its creation to Succeeded or Failed, a job that does not exist, a wait whose time runs out.

Each command is the real one in a subprocess, its stdout a pipe, with a kubeconfig whose current context is the
test's namespace (no -n: the namespace comes from the context, as kubectl's does)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cluster import ControlPlane
from tests.support.documented import documented_commands
from tests.support.operator_harness import OperatorProcess, create, training, wait_for_pods, wait_for_status

pytestmark = pytest.mark.controlplane

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli"]
# docs/status.md, "Follow a job": run here as written, on a job of that name
WATCH = "kubetrain status cifar-mixup --watch"
WAIT = "kubetrain wait cifar-mixup --timeout 3600"
LIFECYCLE = ("Pending", "Starting", "Running")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")
FINISH_SECONDS = 300.0


@pytest.fixture
def user_env(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose kubeconfig's current context is this test's namespace."""
    return {**os.environ, "KUBECONFIG": str(control_plane.user_kubeconfig(namespace, tmp_path))}


def documented(text: str) -> list[str]:
    """The words after `kubetrain` of a command docs/status.md shows."""
    assert text in {command.text for command in documented_commands()}, f"no document shows `{text}` any more"
    words = shlex.split(text)
    assert words[0] == "kubetrain"
    return words[1:]


def start(words: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*KUBETRAIN, *words], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen[str], timeout: float = FINISH_SECONDS) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a command that must end by itself."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"{process.args} still ran after {timeout:g}s\nstdout:\n{out}\nstderr:\n{err}") from None
    return process.returncode, out, err


def run(words: list[str], env: dict[str, str], timeout: float = FINISH_SECONDS) -> tuple[int, str, str]:
    return finish(start(words, env), timeout)


def phases(out: str) -> list[str]:
    """The phase of the status `status --watch` printed first, then the phase of each line after it."""
    lines = out.splitlines()
    first = lines[0].split(": ", 1)[1].split()[0]  # "<namespace>/<name>: Pending (not seen by the operator yet)"
    changes = [line for line in lines[1:] if STAMP.match(line)]
    return [first, *(line.split()[1] for line in changes)]


def assert_followed_to(out: str, end: str) -> None:
    """The lines show the phases in the order a job goes through them, ending with `end`; no escape codes."""
    seen = phases(out)
    assert seen[-1] == end and seen.count(end) == 1, out
    assert "Running" in seen, out
    order = [LIFECYCLE.index(phase) for phase in seen[:-1]]
    assert order == sorted(order), out
    assert "\x1b" not in out, "a pipe gets plain lines"


class Watching:
    """`kubetrain status --watch` running, its stdout read line by line as it comes (a thread), so the test can wait
    for its first line and still get every line after it."""

    def __init__(self, words: list[str], env: dict[str, str]) -> None:
        self.process = start(words, env)
        self.lines: list[str] = []
        self.first = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            self.lines.append(text)
            self.first.set()

    def wait_for_first_line(self, timeout: float = 180) -> None:
        assert self.first.wait(timeout), f"{self.process.args} printed nothing in {timeout:g}s"

    def finish(self, timeout: float = FINISH_SECONDS) -> tuple[int, str, str]:
        """Exit code, every line it printed, and stderr."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            out = "".join(self.lines)
            raise AssertionError(f"{self.process.args} still ran after {timeout:g}s\nstdout:\n{out}") from None
        self.reader.join(timeout=30)
        assert self.process.stderr is not None
        return code, "".join(self.lines), self.process.stderr.read()


def launcher_finishes(plane: ControlPlane, namespace: str, name: str, operator: OperatorProcess, phase: str,
                      exit_code: int, watching: Watching) -> None:
    """Once the job is Running and `watching` has printed the status it then follows (its first line: a command
    started on a loaded machine may take seconds to get there), its launcher pod ends with `phase` and `exit_code`."""
    wait_for_status(plane, namespace, name, operator, phase="Running", timeout=180)
    watching.wait_for_first_line()
    launcher = wait_for_pods(plane, namespace, name, 1, role="launcher", timeout=180)[0]
    plane.set_pod_outcome(namespace, launcher["metadata"]["name"], phase, exit_code=exit_code)


def test_watch_and_wait_follow_a_job_to_succeeded_and_exit_0(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, user_env: dict[str, str]
) -> None:
    create(control_plane, namespace, training("cifar-mixup", resources={"gpusPerWorker": 0}))
    watching, waiting = Watching(documented(WATCH), user_env), start(documented(WAIT), user_env)
    launcher_finishes(control_plane, namespace, "cifar-mixup", operator, "Succeeded", 0, watching)

    code, out, err = finish(waiting)
    assert (code, err) == (0, ""), out + err
    assert out.startswith(f"{namespace}/cifar-mixup Succeeded: LauncherSucceeded") and out.count("\n") == 1, out

    code, out, err = watching.finish()
    assert (code, err) == (0, ""), out + err
    assert out.startswith(f"{namespace}/cifar-mixup: "), out
    assert_followed_to(out, "Succeeded")


def test_watch_and_wait_exit_1_when_the_job_fails(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, user_env: dict[str, str]
) -> None:
    create(control_plane, namespace, training("broken", resources={"gpusPerWorker": 0},
                                              runPolicy={"backoffLimit": 0}))
    watching, waiting = Watching(["status", "broken", "-w"], user_env), start(["wait", "broken"], user_env)
    launcher_finishes(control_plane, namespace, "broken", operator, "Failed", 1, watching)

    code, out, err = finish(waiting)
    assert (code, err) == (1, ""), out + err
    assert out.startswith(f"{namespace}/broken Failed: LauncherFailed: ") and out.count("\n") == 1, out

    code, out, err = watching.finish()
    assert (code, err) == (1, ""), out + err
    assert_followed_to(out, "Failed")
    assert "message: " in out.splitlines()[-1], "the last line says why it failed"


def test_a_job_that_does_not_exist_exits_2_naming_it(
    crd: ControlPlane, namespace: str, user_env: dict[str, str]
) -> None:
    for words in (["wait", "nope"], ["status", "nope", "--watch"]):
        code, out, err = run(words, user_env, timeout=120)
        assert (code, out) == (2, ""), out + err
        assert err == f"kubetrain: error: DistributedTraining {namespace}/nope not found\n"


def test_wait_whose_timeout_passes_exits_124_saying_so(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, user_env: dict[str, str]
) -> None:
    create(control_plane, namespace, training("slow", resources={"gpusPerWorker": 0}))
    wait_for_status(control_plane, namespace, "slow", operator, phase="Running", timeout=180)
    code, out, err = run(["wait", "slow", "--timeout", "1"], user_env, timeout=120)
    assert (code, out) == (124, ""), out + err
    assert err.startswith(f"kubetrain: error: timed out after 1s waiting for DistributedTraining {namespace}/slow to "
                          "finish: it is Running (workers=2/2"), err
    assert err.count("\n") == 1, err
