"""The operator's liveness endpoint (kopf's /healthz, which the chart's probes call) on the real API server: 200 while
its loops run, 500 once one of them has ended, so that the kubelet restarts it instead of leaving it silent."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request

from tests.support.cluster import ControlPlane, free_port, wait_until
from tests.support.operator_harness import REPO, operator_command, operator_log_dir


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)


def test_liveness_fails_once_the_leader_election_loop_has_ended(crd: ControlPlane, namespace: str) -> None:
    port = free_port()
    command, scope = operator_command(namespace)
    command += [f"--liveness=http://127.0.0.1:{port}/healthz", "-m", "tests.support.ending_loop"]
    env = {**crd.env(), "PYTHONUNBUFFERED": "1", **scope,
           "KUBETRAIN_LEASE_NAMESPACE": namespace, "KUBETRAIN_LEASE_NAME": "kubetrain-health"}
    log_path = operator_log_dir() / f"{namespace}-health.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    try:
        first = wait_until(lambda: (answer := healthz(port))[0] and answer, timeout=60, interval=0.2,
                           message="the liveness endpoint to answer")
        assert first[0] == 200, first
        ended = wait_until(lambda: (answer := healthz(port))[0] == 500 and answer, timeout=60,
                           message="the liveness endpoint to fail")
        assert process.poll() is None
        assert "leader election has ended" in log_path.read_text(), "the log says which loop"
        print(f"/healthz: {ended}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        print(log_path.read_text()[-4000:])
