"""The launcher's command runs through images/entrypoints/lib/run_with_report.py: its output streams through as it
comes, its exit code is kept, signals reach it, and a failure leaves a report in the termination log. Here with
small shell commands standing in for mpirun; tests/launch/test_failure_report.py runs the real MPI."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[3] / "images" / "entrypoints" / "lib" / "run_with_report.py"


def start(tmp_path: Path, script: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-B", str(RUNNER), "openmpi4", str(tmp_path / "termination-log"),
                             "sh", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def read_line(pipe, timeout: float = 10) -> str:
    ready, _, _ = select.select([pipe], [], [], timeout)
    assert ready, f"nothing came within {timeout}s"
    return pipe.readline()


def test_each_line_comes_through_at_once_and_a_failure_leaves_its_report(tmp_path):
    run = start(tmp_path, 'echo "[1,0]<stdout>:first"; while [ ! -e go ]; do sleep 0.05; done; '
                          'echo "[1,1]<stderr>:ValueError: boom" >&2; exit 3')
    assert read_line(run.stdout) == "[1,0]<stdout>:first\n"  # while the command still runs
    assert run.poll() is None
    (tmp_path / "go").touch()
    out, err = run.communicate(timeout=10)
    assert run.returncode == 3
    assert err.startswith("[1,1]<stderr>:ValueError: boom\n"), err
    assert "kubetrain launcher: rank 1 exited with code 3 (its output ended last)" in err
    report = json.loads((tmp_path / "termination-log").read_text())
    assert (report["rank"], report["rankFrom"], report["exitCode"], report["lastLines"]) == (
        1, "LastOutput", 3, ["ValueError: boom"])


def test_a_command_that_succeeds_leaves_no_report(tmp_path):
    run = start(tmp_path, "echo done")
    assert run.communicate(timeout=10) == ("done\n", "")
    assert run.returncode == 0 and not (tmp_path / "termination-log").exists()


def test_sigterm_reaches_the_command_and_its_exit_code_is_kept(tmp_path):
    run = start(tmp_path, 'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done')
    assert read_line(run.stdout) == "ready\n"
    run.send_signal(signal.SIGTERM)
    out, _ = run.communicate(timeout=10)
    assert out == "got TERM\n" and run.returncode == 7


def test_a_command_killed_by_a_signal_exits_128_plus_its_number(tmp_path):
    run = start(tmp_path, "kill -9 $$")
    run.communicate(timeout=10)
    assert run.returncode == 128 + 9
    assert json.loads((tmp_path / "termination-log").read_text())["exitCode"] == 137


def test_a_process_left_holding_the_output_does_not_keep_the_launcher_running(tmp_path):
    started = time.monotonic()
    run = start(tmp_path, "sleep 30 & exit 4")
    run.communicate(timeout=20)
    assert run.returncode == 4 and time.monotonic() - started < 10


def test_an_unwritable_termination_log_is_said_and_the_exit_code_kept(tmp_path):
    run = subprocess.run([sys.executable, "-B", str(RUNNER), "openmpi4", str(tmp_path / "missing" / "log"),
                          "sh", "-c", "exit 5"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 5
    assert f"cannot write the failure report to {tmp_path / 'missing' / 'log'}" in run.stderr
    assert not os.path.exists(tmp_path / "missing")
