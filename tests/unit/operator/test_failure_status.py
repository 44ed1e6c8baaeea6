"""status.failure, the condition and the Warning event of a failed attempt: which rank failed, in which pod on which
node, how, and its last lines; from the launcher's failure report (its termination message, untrusted) or from a
failed pod's own state."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_plan import NOW, config_children, job_of, launcher, worker

from kubetrain import reasons as r
from kubetrain.contract import FAILURE_LINE_CHARS, FAILURE_LINES, FAILURE_LINES_BYTES, FAILURE_REPORT_KIND
from kubetrain.failure_report import Placement, clean_line, from_launcher, read_report
from kubetrain.plan import Children, decide
from kubetrain.plan.model import EVENT_MESSAGE_CHARS

RUNNING = {"phase": r.RUNNING, "restarts": 0, "attempt": 0}
LINES = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "ValueError: boom"]


def report(**fields: Any) -> str:
    return json.dumps({"kind": FAILURE_REPORT_KIND, "rank": 1, "rankFrom": "MPI", "host": None, "exitCode": 3,
                       "signal": None, "linesOf": "rank", "lastLines": LINES, **fields})


def failed_launcher(job: Any, message: str | None, exit_code: int = 3, attempt: int = 0) -> tuple[dict, dict]:
    batch, pod = launcher(job, attempt)
    terminated = {"reason": "Error", "exitCode": exit_code, **({"message": message} if message else {})}
    pod["spec"] = {"nodeName": "node-l"}
    pod["status"] = {"phase": "Failed",
                     "containerStatuses": [{"name": "launcher", "state": {"terminated": terminated}}]}
    return batch, pod


def placed(job: Any, index: int, node: str, **status: Any) -> dict:
    pod = worker(job, index, **status)
    pod["spec"]["nodeName"] = node
    return pod


def after_launcher_failed(message: str | None, exit_code: int = 3, status: dict | None = None, **spec: Any):
    job = job_of(**spec)
    attempt = (status or RUNNING)["attempt"]
    batch, pod = failed_launcher(job, message, exit_code, attempt)
    workers = [placed(job, index, f"node-{index}", attempt=attempt) for index in range(job.spec.workers)]
    return decide(job, status or RUNNING, Children(pods=[*workers, pod], jobs=[batch], **config_children(job)), NOW)


def test_a_rank_that_failed_is_named_with_its_pod_node_exit_code_and_last_lines() -> None:
    plan = after_launcher_failed(report())
    # the launcher exited 3 as rank 1 did: not its own exit 3 for workers that never accepted ssh
    assert plan.status["phase"] == r.RESTARTING and plan.status["reason"] == r.LAUNCHER_FAILED
    assert plan.status["failure"] == {
        "attempt": 0, "rank": 1, "rankFrom": "MPI", "pod": "cifar-worker-1", "node": "node-1", "exitCode": 3,
        "signal": None, "reason": "Error", "lastLines": LINES, "linesFrom": "rank 1"}
    headline = "rank 1 failed in pod cifar-worker-1 on node node-1: Error (exit code 3)"
    assert plan.status["message"] == f"restart 1/3: {headline}"
    restarting = next(c for c in plan.status["conditions"] if c["type"] == r.COND_RESTARTING)
    assert restarting["message"] == f"restart 1/3: {headline}"
    [event] = [e for e in plan.events if e.type == "Warning"]
    assert event.reason == r.LAUNCHER_FAILED
    assert event.message == (f"restart 1/3: {headline}\nlast lines of rank 1:\n"
                             + "\n".join(f"  | {line}" for line in LINES))


@pytest.mark.parametrize(
    ("fields", "spec", "expected", "headline"),
    [
        # the launcher runs rank 0 (runAsWorker): rank 1 is worker 0's
        ({}, {"launcher": {"runAsWorker": True}}, {"rank": 1, "pod": "cifar-worker-0", "node": "node-0"},
         "rank 1 failed in pod cifar-worker-0 on node node-0: Error (exit code 3)"),
        # two ranks per worker: rank 3 is worker 1's second
        ({"rank": 3}, {"slotsPerWorker": 2, "resources": {"gpusPerWorker": 2}}, {"rank": 3, "pod": "cifar-worker-1"},
         "rank 3 failed in pod cifar-worker-1"),
        ({"rank": 0, "signal": "9 (Killed)", "exitCode": 137, "host": "cifar-worker-0.cifar.ml.svc"}, {},
         {"rank": 0, "reason": "Signal", "signal": "9 (Killed)", "exitCode": 137, "pod": "cifar-worker-0"},
         "rank 0 failed in pod cifar-worker-0 on node node-0: killed by signal 9 (Killed), exit code 137"),
        ({"rankFrom": "LastOutput"}, {}, {"rank": 1, "rankFrom": "LastOutput"},
         "rank 1 (its output ended last; the MPI named no rank) failed in pod cifar-worker-1"),
        # a guess the MPI's own words contradict (the host it named) is dropped
        ({"rankFrom": "LastOutput", "host": "cifar-worker-0"}, {},
         {"rank": None, "pod": "cifar-worker-0", "node": "node-0", "linesFrom": "the launcher"},
         "launcher pod cifar-launcher-abc failed: Error (exit code 3), in pod cifar-worker-0 on node node-0"),
        # no rank: the MPI's own last lines, and the last one in the message
        ({"rank": None, "rankFrom": None, "linesOf": "launcher", "lastLines": ["ORTE was unable to start daemons"],
          "exitCode": 1}, {}, {"rank": None, "pod": None, "linesFrom": "the launcher"},
         'launcher pod cifar-launcher-abc failed: Error (exit code 1); last line: "ORTE was unable to start daemons"'),
        # a rank beyond the job's, a host that is not one of its pods: not believed
        ({"rank": 7, "host": "evil.example.com"}, {}, {"rank": None, "pod": None}, "launcher pod cifar-launcher-abc"),
        # an elastic job: Horovod orders the ranks itself; the host it named says which pod
        ({"host": "cifar-launcher"}, {"elastic": {"minWorkers": 1, "maxWorkers": 2}, "launcher": {"runAsWorker": True}},
         {"rank": 1, "pod": "cifar-launcher-abc", "node": "node-l"},
         "rank 1 failed in pod cifar-launcher-abc on node node-l: Error (exit code 3)"),
    ],
)
def test_where_the_failing_rank_ran(fields: dict, spec: dict, expected: dict, headline: str) -> None:
    plan = after_launcher_failed(report(**fields), **spec)
    failure = plan.status["failure"]
    assert {key: failure[key] for key in expected} == expected, failure
    assert plan.status["message"].startswith(f"restart 1/3: {headline}"), plan.status["message"]


def test_a_worker_that_failed_itself_is_named_with_its_rank_node_and_reason() -> None:
    job = job_of()
    batch, pod = launcher(job)
    oom = placed(job, 1, "gpu-node-3", phase="Failed", ready=False, containerStatuses=[
        {"name": "worker", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}])
    plan = decide(job, RUNNING, Children(pods=[placed(job, 0, "n0"), oom, pod], jobs=[batch], **config_children(job)),
                  NOW)
    assert plan.status["reason"] == r.WORKER_FAILED
    assert plan.status["message"] == ("restart 1/3: worker pod cifar-worker-1 failed: OOMKilled (exit code 137) "
                                      "on node gpu-node-3 (rank 1)")
    assert plan.status["failure"] == {
        "attempt": 0, "rank": 1, "rankFrom": "Hostfile", "pod": "cifar-worker-1", "node": "gpu-node-3",
        "exitCode": 137, "signal": None, "reason": "OOMKilled", "lastLines": [], "linesFrom": None}


def test_a_launcher_that_wrote_no_report_shows_its_logs_last_line() -> None:
    """Its configuration check failed (exit 2), or the image has no Python: the kubelet's log tail stands in."""
    tail = "kubetrain launcher: waiting up to 300s for 2 host(s)\nkubetrain launcher: error: giving up on worker(s) x"
    plan = after_launcher_failed(tail, exit_code=3)
    assert plan.status["reason"] == r.WORKERS_UNREACHABLE
    assert plan.status["message"] == ('restart 1/3: launcher pod cifar-launcher-abc failed: Error (exit code 3) on '
                                      'node node-l; last line: "kubetrain launcher: error: giving up on worker(s) x"')
    failure = plan.status["failure"]
    assert failure["lastLines"] == tail.splitlines() and failure["linesFrom"] == "launcher pod cifar-launcher-abc"


def test_the_failure_is_kept_when_the_backoff_limit_fails_the_job() -> None:
    plan = after_launcher_failed(report(), status={**RUNNING, "restarts": 3, "attempt": 3},
                                 runPolicy={"backoffLimit": 3})
    assert plan.status["phase"] == r.FAILED
    assert plan.status["failure"]["rank"] == 1 and plan.status["failure"]["attempt"] == 3
    assert plan.status["message"].endswith("Error (exit code 3) (backoffLimit 3 reached after 3 restarts)")
    [event] = [e for e in plan.events if e.type == "Warning"]
    assert event.message.startswith(plan.status["message"] + "\nlast lines of rank 1:")


def test_the_event_keeps_the_latest_lines_that_fit() -> None:
    lines = [f"line {i} " + "x" * 180 for i in range(FAILURE_LINES)]
    plan = after_launcher_failed(report(lastLines=lines))
    [event] = [e for e in plan.events if e.type == "Warning"]
    assert len(event.message) <= EVENT_MESSAGE_CHARS
    assert event.message.endswith(lines[-1]) and lines[0] not in event.message


@pytest.mark.parametrize(
    "message",
    ["", "not json", "[1, 2]", json.dumps({"kind": "someone-else", "rank": 1}), report()[:-1],
     json.dumps({"kind": FAILURE_REPORT_KIND, "rank": 1, "pad": "x" * 5000})],
)
def test_a_termination_message_that_is_not_a_whole_report_is_not_read_as_one(message: str) -> None:
    assert read_report(message) is None


def test_a_report_is_read_as_untrusted_data() -> None:
    """Whatever the image or a rank on the launcher wrote: numbers must be numbers, a host a host name, lines are
    cut and lose their control characters, escapes and bidirectional overrides."""
    hostile = report(rank=True, exitCode=-1, host="a b\nc", signal="\x1b[2J9", lastLines=[
        "\x1b[31mred\x1b[0m", "fake\rreal", "\u202egnp.exe", "tab\there", 42, None, "",
        "ok " + "y" * 500, *[f"older {i}" for i in range(40)]])
    found = read_report(hostile)
    assert found is not None
    assert (found.rank, found.exit_code, found.host, found.signal) == (None, None, None, "9")
    assert found.last_lines[-1] == "older 39" and len(found.last_lines) == FAILURE_LINES
    assert sum(len(line.encode()) + 1 for line in found.last_lines) <= FAILURE_LINES_BYTES
    assert [clean_line(text) for text in ["\x1b[31mred\x1b[0m", "fake\rreal", "\u202egnp.exe", "tab\there"]] == [
        "red", "real", "gnp.exe", "tab here"]
    assert len(clean_line("y" * 500)) == FAILURE_LINE_CHARS


def test_a_rank_is_only_ever_one_of_the_attempts_ranks() -> None:
    where = Placement(("w-0", "w-1"), 2, {"w-0": ("w-0", "n0"), "w-1": ("w-1", "n1")})
    found = read_report(report(rank=2))
    assert found is not None and from_launcher(found, where, 3).rank is None
