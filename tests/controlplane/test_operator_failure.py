"""A failed attempt, against the real API server and the operator: `kubectl describe dtr NAME` alone says which rank
failed, in which pod on which node, how, and what it printed last (status.failure, the condition, the event)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from tests.support.cluster import ControlPlane
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    live_pods,
    posted,
    training,
    wait_for_pods,
    wait_for_status,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "unit" / "images" / "mpi_output" / "openmpi4-exit"
TRACEBACK = ["rank 1 starting", "Traceback (most recent call last):", "ValueError: boom on rank 1"]


def entrypoint_report() -> ModuleType:
    path = REPO / "images" / "entrypoints" / "lib" / "failure_report.py"
    spec = importlib.util.spec_from_file_location("entrypoint_failure_report", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def termination_message(streams: list[tuple[str, str]], exit_code: int) -> str:
    """What the launcher's entrypoint writes after Open MPI's output `streams` ((stream, text) in order) and mpirun's
    `exit_code`."""
    report = entrypoint_report()
    output = report.RankOutput("openmpi4")
    for stream, text in streams:
        output.feed(stream, text)
    output.close()
    return report.encode(report.report(output, exit_code)).decode()


def launcher_termination_message() -> str:
    """What the launcher's entrypoint writes when Open MPI's real output says rank 1 exited 3 (a captured run)."""
    return termination_message([(stream, SAMPLE.with_suffix(f".{stream}").read_bytes().decode())
                                for stream in ("stdout", "stderr")], 3)


def test_a_failing_rank_is_named_with_its_pod_node_exit_code_and_last_lines(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("crash", runPolicy={"backoffLimit": 0}))
    workers = {pod["metadata"]["name"]: pod for pod in wait_for_pods(control_plane, namespace, "crash", 2)}
    node = workers["crash-worker-1"]["spec"]["nodeName"]
    [launcher] = wait_for_pods(control_plane, namespace, "crash", 1, role="launcher")
    control_plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=3,
                                  message=launcher_termination_message())

    failed = wait_for_status(control_plane, namespace, "crash", operator, phase="Failed")
    assert failed["failure"] == {"attempt": 0, "rank": 1, "rankFrom": "MPI", "pod": "crash-worker-1", "node": node,
                                 "exitCode": 3, "reason": "Error", "lastLines": TRACEBACK, "linesFrom": "rank 1"}
    headline = f"rank 1 failed in pod crash-worker-1 on node {node}: Error (exit code 3)"
    assert failed["reason"] == "LauncherFailed"
    assert failed["message"] == f"{headline} (backoffLimit 0 reached after 0 restarts)"
    condition = next(c for c in failed["conditions"] if c["type"] == "Failed")
    assert condition["message"] == failed["message"]
    [warning] = posted(control_plane, namespace, "crash", "LauncherFailed")
    assert warning["reason"] == "LauncherFailed"
    assert warning["message"] == (f"{failed['message']}\nlast lines of rank 1:\n"
                                  + "\n".join(f"  | {line}" for line in TRACEBACK))

    described = control_plane.kubectl("describe", "dtr", "crash", "--namespace", namespace)
    start = described.index("\n  Failure:\n")
    failure = described[start:described.index("\n  Message:", start) + 1]
    for field, value in (("Rank", "1"), ("Pod", "crash-worker-1"), ("Node", node), ("Exit Code", "3"),
                         ("Reason", "Error"), ("Rank From", "MPI")):
        assert re.search(rf"^ +{field}: +{re.escape(value)}$", failure, re.MULTILINE), f"{field}: {value}\n{failure}"
    assert "    Last Lines:\n" + "".join(f"      {line}\n" for line in TRACEBACK) in failure, failure
    events_part = described[described.index("Events:"):]
    assert headline in events_part and "\n  | ValueError: boom on rank 1\n" in events_part, events_part


def test_a_worker_killed_for_memory_is_named_with_its_rank_and_node(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("hungry", runPolicy={"backoffLimit": 1}))
    wait_for_pods(control_plane, namespace, "hungry", 1, role="launcher")
    [worker] = [pod for pod in live_pods(control_plane, namespace, "hungry") if pod["metadata"]["name"].endswith("-0")]
    node = worker["spec"]["nodeName"]
    control_plane.set_pod_outcome(namespace, "hungry-worker-0", "Failed", reason="OOMKilled", exit_code=137)

    restarted = wait_for_status(control_plane, namespace, "hungry", operator, restarts=1)
    assert restarted["failure"] == {"attempt": 0, "rank": 0, "rankFrom": "Hostfile", "pod": "hungry-worker-0",
                                    "node": node, "exitCode": 137, "reason": "OOMKilled", "lastLines": []}
    said = [e["message"] for e in posted(control_plane, namespace, "hungry", "WorkerFailed")]
    assert f"restart 1/1: worker pod hungry-worker-0 failed: OOMKilled (exit code 137) on node {node} (rank 0)" \
        in said, said


def cpu_image_termination_message(line: str) -> str:
    """The launcher's report when both ranks stop with `line` and Open MPI names rank 0 as the first to exit 2: the
    captured run's summary, with this run's lines, rank and exit code."""
    summary = SAMPLE.with_suffix(".stderr").read_text().split("\n", 1)[1]
    summary = summary.replace("[[20785,1],1]", "[[20785,1],0]").replace("Exit code:    3", "Exit code:    2")
    return termination_message([("stderr", f"[1,0]<stderr>:{line}\n[1,1]<stderr>:{line}\n{summary}")], 2)


def test_a_rank_holding_a_gpu_in_a_cpu_image_fails_the_job_at_once_naming_the_image_to_use(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("cpu-image", runPolicy={"backoffLimit": 3}))
    workers = wait_for_pods(control_plane, namespace, "cpu-image", 2)
    env = {entry["name"]: entry.get("value") for entry in workers[0]["spec"]["containers"][0]["env"]}
    assert (env["KUBETRAIN_GPUS_PER_RANK"], env["KUBETRAIN_IMAGE"]) == ("1", "kubetrain/mnist:0.1.0")
    line = ("mnist: error: kubetrain/mnist:0.1.0 is a CPU image: use kubetrain/mnist:0.1.0-gpu, or set "
            "resources.gpusPerWorker: 0 to train on CPUs")  # what trainlib prints then (tests/jobs: for real)
    [launcher] = wait_for_pods(control_plane, namespace, "cpu-image", 1, role="launcher")
    control_plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=2,
                                  message=cpu_image_termination_message(line))

    failed = wait_for_status(control_plane, namespace, "cpu-image", operator, phase="Failed")
    assert failed["restarts"] == 0, "bad configuration: no restart"
    assert (failed["failure"]["rank"], failed["failure"]["exitCode"], failed["failure"]["lastLines"]) == (0, 2, [line])
    assert "FailJob on launcher exit code In [2]" in failed["message"], failed["message"]
    described = control_plane.kubectl("describe", "dtr", "cpu-image", "--namespace", namespace)
    assert f"    Last Lines:\n      {line}\n" in described, described
