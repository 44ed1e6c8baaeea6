"""`kubetrain logs` decided without a cluster: one rank's lines of real launcher output, the lines of a stream, a log
read again after a dropped connection showing nothing twice, what -f does next, and one clear line for each thing
that cannot be shown; then -f across a restart, the API server's answers scripted (kwok serves no log: the real one is
the kind tier's)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain import follow, logs, logs_loop
from kubetrain.contract import LABEL_ATTEMPT, ROLE_LAUNCHER

# Real output, kept as it was printed:
# `mpirun --tag-output -np 2 sh -c 'echo "hello from $OMPI_COMM_WORLD_RANK"; echo "oops $OMPI_COMM_WORLD_RANK" >&2'`
# with Open MPI 4.1.4 (Debian 12's, in kubetrain's images);
OPEN_MPI = "[1,0]<stdout>:hello from 0\n[1,0]<stderr>:oops 0\n[1,1]<stdout>:hello from 1\n[1,1]<stderr>:oops 1\n"
# `horovodrun -np 2 -H localhost:2 --gloo sh -c '...$HOROVOD_RANK...'` with Horovod 0.28.1: its own lines untagged;
HOROVODRUN = ("2026-11-27 04:29:48.310581: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You "
              "may see slightly different numerical results due to floating-point round-off errors from different "
              "computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.\n"
              "[1]<stderr>:oops 1\n[0]<stdout>:hello from 0\n[0]<stderr>:oops 0\n[1]<stdout>:hello from 1\n")
# and the launcher's own mpirun (images/entrypoints/lib/mpi.sh), which asks for no tags.
UNTAGGED = ("kubetrain launcher: waiting up to 300s for 2 host(s): cifar-worker-0.cifar.ml.svc "
            "cifar-worker-1.cifar.ml.svc\nhello from 0\nhello from 1\n")


def test_one_ranks_lines_of_open_mpi_tagged_output_keep_their_tags() -> None:
    assert logs.only_rank(OPEN_MPI, 1, "ml", "cifar", 0) == "[1,1]<stdout>:hello from 1\n[1,1]<stderr>:oops 1\n"


def test_one_ranks_lines_of_horovodrun_output_leave_horovodruns_own_out() -> None:
    assert logs.only_rank(HOROVODRUN, 0, "ml", "cifar", 2) == "[0]<stdout>:hello from 0\n[0]<stderr>:oops 0\n"
    assert logs.only_rank(HOROVODRUN, 7, "ml", "cifar", 2) == "", "a rank that wrote nothing: nothing, no error"


def test_output_without_rank_tags_cannot_be_filtered_and_says_so() -> None:
    with pytest.raises(logs.NoRankTags) as raised:
        logs.only_rank(UNTAGGED, 1, "ml", "cifar", 0)
    message = str(raised.value)
    assert message.startswith("--rank cannot filter attempt 0 of ml/cifar: no line of its launcher output starts "
                              "with a rank tag") and "\n" not in message
    assert logs.only_rank("", 1, "ml", "cifar", 0) == "", "no output at all: nothing to filter, nothing to say"


def test_a_streams_lines_come_whole_across_chunks() -> None:
    chunks = [b"[1,0]<stdout>:caf", b"\xc3", b"\xa9\n[1,1]<std", b"out>:done\nno newline at the end"]
    assert list(logs.lines_of(chunks)) == ["[1,0]<stdout>:café", "[1,1]<stdout>:done", "no newline at the end"]
    assert list(logs.lines_of([b"bad \xff byte\n"])) == ["bad \ufffd byte"]


def stamped(lines: list[tuple[str, str]]) -> list[str]:
    return [f"{stamp} {text}" for stamp, text in lines]


def shown(resume: logs.Resume, lines: list[str]) -> list[str]:
    resume.again()
    fresh = []
    for line in lines:
        stamp, text = logs.split_stamp(line)
        if resume.fresh(stamp):
            fresh.append(text)
    return fresh


def test_a_log_read_again_from_its_start_shows_only_what_came_since() -> None:
    first = stamped([("2026-11-27T10:00:01.5Z", "a"), ("2026-11-27T10:00:01.5Z", "b")])  # written at once: one time
    again = stamped([("2026-11-27T10:00:01.5Z", "a"), ("2026-11-27T10:00:01.5Z", "b"),
                     ("2026-11-27T10:00:01.5Z", "c"), ("2026-11-27T10:00:02.000000001Z", "d")])
    resume = logs.Resume()
    assert shown(resume, first) == ["a", "b"]
    assert shown(resume, again) == ["c", "d"]
    assert shown(resume, again) == []
    assert logs.split_stamp("2026-11-27T10:00:01.45Z x")[0] < logs.split_stamp("2026-11-27T10:00:01.5Z x")[0]


def launcher_pod(attempt: int, uid: str, state: str | None = "running", created: str = "2026-11-27T10:00:00Z"
                 ) -> dict[str, Any]:
    statuses = [{"name": ROLE_LAUNCHER, "state": {state: {}} if state else {"waiting": {}}}]
    return {"metadata": {"name": f"cifar-launcher-{uid}", "uid": uid, "creationTimestamp": created,
                         "labels": {LABEL_ATTEMPT: str(attempt)}},
            "status": {"phase": "Running" if state == "running" else "Pending", "containerStatuses": statuses}}


def job(phase: str, attempt: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "cifar", "namespace": "ml"}, "status": {"phase": phase, "attempt": attempt}}


def test_follow_streams_the_current_attempts_launcher_then_waits_for_the_next_attempt() -> None:
    old, new = launcher_pod(0, "a"), launcher_pod(1, "b")
    assert logs.follow_step(job("Running"), [old], set(), set()) == logs.Stream(old, 0)
    assert logs.follow_step(job("Running"), [old], {"a"}, {0}) == logs.Wait(), "read to its end, the job not moved"
    assert logs.follow_step(job("Restarting", 1), [old], {"a"}, {0}) == logs.Wait()
    pending = launcher_pod(1, "b", state=None)
    assert logs.follow_step(job("Starting", 1), [pending], {"a"}, {0}) == logs.Wait(), "no log before it starts"
    assert logs.follow_step(job("Running", 1), [old, new], {"a"}, {0}) == logs.Stream(new, 1)


def test_follow_ends_with_the_job_after_its_last_attempts_output() -> None:
    last = launcher_pod(1, "b", state="terminated")
    assert logs.follow_step(job("Succeeded", 1), [last], set(), set()) == logs.Stream(last, 1)
    ended = logs.follow_step(job("Succeeded", 1), [last], {"b"}, {1})
    assert isinstance(ended, logs.End) and follow.exit_code(ended.snap) == 0
    assert logs.follow_step(job("Failed", 2), [], set(), {1}) == logs.ShowCopy(2), "its pod is gone: the kept copy"
    assert isinstance(logs.follow_step(job("Failed", 2), [], set(), {1, 2}), logs.End)


def test_the_newest_started_launcher_of_an_attempt_is_the_one_read() -> None:
    first = launcher_pod(0, "a", created="2026-11-27T10:00:00Z")
    second = launcher_pod(0, "b", created="2026-11-27T10:05:00Z")
    assert logs.launcher_of([second, first, launcher_pod(1, "c")], 0) == second
    assert logs.launcher_of([launcher_pod(0, "d", state=None)], 0) is None


def test_what_cannot_be_shown_is_said_in_one_line_naming_what_there_is() -> None:
    pending = follow.snapshot({"status": {"phase": "Pending", "reason": "WaitingForWorkers",
                                          "message": "1/2 workers ready"}})
    lines = [
        logs.no_launcher_yet("ml", "cifar", 0, pending),
        logs.attempt_not_found("ml", "cifar", 7, 3, [1, 2, 3]),
        logs.attempt_not_found("ml", "cifar", 0, 0, []),
        logs.unreadable("ml", "cifar", 1, "cifar-launcher-x", "500 Internal Server Error: dial tcp: i/o timeout"),
        logs.not_kept("ml", "cifar", 1, "the log of launcher pod cifar-launcher-x could not be read: ..."),
    ]
    assert all("\n" not in line for line in lines)
    assert lines[0] == ("no launcher pod of ml/cifar (attempt 0) has started: the job is Pending (WaitingForWorkers: "
                        "1/2 workers ready)")
    assert lines[1].startswith("attempt 7 of ml/cifar not found: the job is at attempt 3; the output of attempt(s) "
                               "1, 2, 3 is kept")
    assert "no attempt's launcher output is kept" in lines[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubetrain(*words: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "PYTHONPATH": ":".join(sys.path)}
    return subprocess.run([sys.executable, "-m", "kubetrain.cli", *words], capture_output=True, text=True, env=env,
                          timeout=120)


def test_no_cluster_and_a_usage_error_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{closed_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ml"}}]}))
    done = kubetrain("logs", "cifar", kubeconfig=config)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("kubetrain: error: no cluster reachable at https://127.0.0.1:") and \
        done.stderr.count("\n") == 1, done.stderr
    both = kubetrain("logs", "cifar", "-f", "--attempt", "0", kubeconfig=config)
    assert both.returncode == 2 and both.stderr.splitlines()[-1] == (
        "kubetrain: error: --attempt shows an attempt that ended; -f follows the current one: use one of them")
    bad = kubetrain("logs", "cifar", "--rank", "-1", kubeconfig=config)
    assert bad.returncode == 2 and "not a whole number from 0: '-1'" in bad.stderr


class ScriptedCluster:
    """What kubetrain.logs_loop reads from the API server, as a script of the job's states: each watch of the job
    moves it on one state per event; reading a launcher pod's log gives that pod's next scripted read and, after its
    last one, moves to the state where its container has ended."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, states: list[tuple[dict, list[dict]]],
                 reads: dict[str, list[list[bytes]]]) -> None:
        self.states, self.reads, self.now = states, reads, 0
        for name in ("follow_training", "launcher_pods", "follow_pod_log", "attempt_log", "list_training"):
            monkeypatch.setattr(logs_loop, name, getattr(self, name))
        monkeypatch.setattr(logs_loop, "AGAIN_SECONDS", 0.0)

    def follow_training(self, cluster: Any, namespace: str, name: str) -> Iterator[dict]:
        yield self.states[self.now][0]
        while self.now + 1 < len(self.states):
            self.now += 1
            yield self.states[self.now][0]
        raise AssertionError("followed past the script's end")

    def launcher_pods(self, cluster: Any, namespace: str, name: str) -> list[dict]:
        return self.states[self.now][1]

    def follow_pod_log(self, cluster: Any, namespace: str, pod: str, container: str) -> Iterator[bytes]:
        chunks = self.reads[pod].pop(0)
        yield from chunks
        if not self.reads[pod]:
            self.now += 1  # its container ended

    def attempt_log(self, cluster: Any, namespace: str, name: str, attempt: int) -> None:
        return None

    def list_training(self, cluster: Any, namespace: str, name: str) -> tuple[dict, str]:
        return self.states[self.now][0], "1"


def restart_script(first: list[bytes], second: list[list[bytes]]) -> tuple[list, dict]:
    """Attempt 0 runs and its launcher ends; the job restarts; attempt 1 runs to Succeeded."""
    a, b = launcher_pod(0, "a"), launcher_pod(1, "b")
    a_ended, b_ended = launcher_pod(0, "a", state="terminated"), launcher_pod(1, "b", state="terminated")
    states = [(job("Running", 0), [a]), (job("Running", 0), [a_ended]), (job("Restarting", 1), []),
              (job("Running", 1), [b]), (job("Running", 1), [b_ended]), (job("Succeeded", 1), [b_ended])]
    return states, {"cifar-launcher-a": [first], "cifar-launcher-b": second}


def test_follow_goes_on_with_the_next_attempt_and_reads_a_dropped_log_again_without_repeats(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    states, reads = restart_script(
        [b"2026-11-27T10:00:01Z a0\n2026-11-27T10:00:02Z ", b"a1\n"],
        [[b"2026-11-27T10:01:03Z b0\n"],  # the connection drops while attempt 1 runs
         [b"2026-11-27T10:01:03Z b0\n2026-11-27T10:01:04Z b1\n"]])
    ScriptedCluster(monkeypatch, states, reads)
    assert logs_loop.show_logs(None, "ml", "cifar", None, None, follow_on=True) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == "a0\na1\nb0\nb1\n"
    assert err == "kubetrain: attempt 1 of ml/cifar follows\n"


def test_follow_with_a_rank_keeps_its_lines_and_says_when_an_attempt_had_no_tags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = [b"2026-11-27T10:00:01Z kubetrain launcher: waiting\n2026-11-27T10:00:02Z [0]<stdout>:zero\n"
              b"2026-11-27T10:00:03Z [1]<stdout>:one\n"]
    states, reads = restart_script(tagged, [[b"2026-11-27T10:01:01Z hello from 1\n"]])
    ScriptedCluster(monkeypatch, states, reads)
    assert logs_loop.show_logs(None, "ml", "cifar", None, 1, follow_on=True) == 2  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == "[1]<stdout>:one\n"
    assert err.startswith("kubetrain: error: --rank cannot filter attempt 1 of ml/cifar: ") and err.count("\n") == 1
