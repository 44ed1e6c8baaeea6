"""`kubetrain tensorboard NAME`: forward a port of this machine to the TensorBoard of the job's rank-0 pod, print its
URL, and keep forwarding until Ctrl-C.

The forward is `kubectl port-forward`, run as a child process. It serves every connection a browser opens at once and
authenticates as kubectl does (the same kubeconfig, exec plugins included). The Python client's port-forward gives
one socket per call, so a local listener with a thread pair per connection would have to be written and kept here.
Which pod, and why there is none, is decided in kubetrain.tensorboard_target.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO

from kubetrain import follow, kube
from kubetrain.tensorboard_target import NoTensorBoard, find_target, logs_command, port_forward_command, url

EXIT_USAGE = follow.EXIT_USAGE
# How long kubectl may take to say it forwards, and TensorBoard to answer through the forward (it loads TensorFlow).
FORWARD_SECONDS = 30.0
ANSWER_SECONDS = 30.0


class ForwardError(RuntimeError):
    """kubectl could not start forwarding; the message is one line."""


def error(message: str) -> None:
    print(f"kubetrain: error: {message}", file=sys.stderr, flush=True)


def serve(cluster: kube.Cluster, namespace: str, name: str, local_port: int, kubectl: str = "kubectl") -> int:
    """Find the job's TensorBoard, forward `local_port` to it, print the URL, wait for Ctrl-C (KeyboardInterrupt)."""
    body, _ = kube.list_training(cluster, namespace, name)
    if body is None:
        error(follow.not_found(namespace, name))
        return EXIT_USAGE
    try:
        target = find_target(body, kube.list_job_pods(cluster, namespace, name))
    except NoTensorBoard as missing:
        error(str(missing))
        return EXIT_USAGE
    program = shutil.which(kubectl)
    if program is None:
        error(f"kubetrain tensorboard forwards the port with kubectl, and there is no {kubectl} on PATH: install "
              "kubectl, or run `kubectl port-forward` yourself")
        return EXIT_USAGE
    process = subprocess.Popen(port_forward_command(program, target, local_port), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        try:
            output = wait_for_forward(process)
        except ForwardError as failed:
            error(f"kubectl port-forward to pod {target.pod}: {failed}")
            return EXIT_USAGE
        answered = wait_for_answer(url(local_port), lambda: process.poll() is None, ANSWER_SECONDS)
        if not answered and process.poll() is not None:  # kubectl gives up on a connection the pod refused
            error(f"TensorBoard in pod {target.pod} does not answer on its port {target.port}; its log says why: "
                  f"{logs_command(target)}")
            return EXIT_USAGE
        print(f"TensorBoard of {namespace}/{name} (pod {target.pod}): {url(local_port)}  (Ctrl-C stops)", flush=True)
        if not answered:
            print(f"kubetrain: warning: TensorBoard does not answer yet; its log says why: {logs_command(target)}",
                  file=sys.stderr, flush=True)
        output.show()
        code = process.wait()
        error(f"kubectl port-forward to pod {target.pod} ended (exit {code}): is the pod gone? (kubetrain status "
              f"{name})")
        return EXIT_USAGE
    finally:
        stop(process)


class KubectlOutput:
    """kubectl's output, read on two threads. `ready` is set once it says it forwards. Its error lines are kept
    (`errors`) until `show()`, then shown on our stderr as they come; its other lines (one per connection) are
    dropped."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.ready = threading.Event()
        self._showing = threading.Event()
        self.errors: list[str] = []
        self._readers = [threading.Thread(target=self._stdout, args=(process.stdout,), daemon=True),
                         threading.Thread(target=self._stderr, args=(process.stderr,), daemon=True)]
        for reader in self._readers:
            reader.start()

    def _stdout(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("Forwarding from"):
                self.ready.set()

    def _stderr(self, stream: IO[str]) -> None:
        for line in stream:
            if self._showing.is_set():
                sys.stderr.write(line)
                sys.stderr.flush()
            else:
                self.errors.append(line)

    def show(self) -> None:
        """From now on kubectl's error lines go to our stderr (the URL is out: they are about the connections)."""
        self._showing.set()

    def join(self) -> None:
        """Wait (briefly) until both streams are read to their end: kubectl has exited."""
        for reader in self._readers:
            reader.join(timeout=2)

    def last_error(self) -> str:
        return next((line.strip() for line in reversed(self.errors) if line.strip()), "")


def wait_for_forward(process: subprocess.Popen[str], seconds: float = FORWARD_SECONDS) -> KubectlOutput:
    """Return once kubectl says it forwards. ForwardError with kubectl's last error line when it ends first, or when
    `seconds` pass."""
    output = KubectlOutput(process)
    deadline = time.monotonic() + seconds
    while not output.ready.wait(0.1):
        if process.poll() is not None:
            output.join()  # what it printed before it ended
            if output.ready.is_set():
                break
            raise ForwardError(output.last_error() or f"kubectl ended (exit {process.returncode})")
        if time.monotonic() > deadline:
            stop(process)
            raise ForwardError(f"kubectl said nothing in {seconds:g} s")
    return output


def wait_for_answer(address: str, alive: Callable[[], bool], seconds: float = ANSWER_SECONDS) -> bool:
    """Whether TensorBoard answers at `address` within `seconds` (it may still be starting)."""
    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(address, timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1)
    return False


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

