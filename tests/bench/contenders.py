"""The operators the benchmark runs side by side: kubetrain as shipped, and mpi-operator v0.8.0 as shipped and tuned.

Each contender knows its job resource, how it labels a job's children, and how to start its process on the shared
control plane as the bench's operator ServiceAccount (so the API server counts its requests apart)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import mpi_operator
from .controlplane_access import REPO, ControlPlane, OperatorRun, training, wait_until
from .latency import KUBETRAIN, MPI_OPERATOR, Convention
from .processes import stop_process


class PeerRun:
    """mpi-operator for one namespace, as the user of `kubeconfig` (the bench's operator ServiceAccount on the control
    plane), with `env` for the rest of its environment."""

    def __init__(self, env: Mapping[str, str], kubeconfig: Path, namespace: str, log: Path,
                 flags: tuple[str, ...]) -> None:
        binary = mpi_operator.binary()
        assert binary is not None, f"build the peer first: {mpi_operator.BUILD}"
        self.log = log
        self.port = mpi_operator.hold_health_port()
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [str(binary), f"--kubeConfig={kubeconfig}", f"--namespace={namespace}",
                 f"--lock-namespace={mpi_operator.LOCK_NAMESPACE}", *flags],
                stdout=output, stderr=subprocess.STDOUT, cwd=REPO,
                env={**env, "KUBECONFIG": str(kubeconfig)})  # it prefers $KUBECONFIG to --kubeConfig

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until it leads (its Lease) and its workers run."""
        def started() -> bool:
            if self.process.poll() is not None:
                port = ("; its health check listens on port 8080, hard-coded, which something else holds"
                        if "Error starting server for health check" in self.tail() else "")
                raise RuntimeError(f"mpi-operator exited {self.process.returncode}{port}; log {self.log}:\n"
                                   f"{self.tail()}")
            return "Started workers" in self.log.read_text(errors="replace")

        wait_until(started, timeout, message="mpi-operator to start its workers")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        stop_process(self.process)
        self.port.close()


Run = OperatorRun | PeerRun


@dataclass(frozen=True)
class Contender:
    name: str
    convention: Convention
    resource: tuple[str, str, str]  # group, version, plural of its job resource
    body: Callable[[str], dict[str, Any]]
    start: Callable[[ControlPlane, Path, str, Path], Run]
    missing: str = ""  # why it cannot run here, if it cannot


def kubetrain(wrap: Callable[[list[str]], list[str]] | None = None) -> Contender:
    """The operator as shipped; `wrap` runs it under something (a memory cgroup)."""
    return Contender("kubetrain", KUBETRAIN, ("kubetrain.dev", "v1alpha1", "distributedtrainings"), training,
                     lambda plane, kubeconfig, ns, log: OperatorRun(plane, kubeconfig, ns, log, wrap))


def peer(tuned: bool) -> Contender:
    flags = mpi_operator.TUNED if tuned else mpi_operator.SHIPPED
    missing = "" if mpi_operator.binary() else f"not built: run {mpi_operator.BUILD.relative_to(REPO)}"
    return Contender(f"mpi-operator {mpi_operator.VERSION} {'tuned' if tuned else 'shipped'}", MPI_OPERATOR,
                     ("kubeflow.org", "v2beta1", "mpijobs"), lambda name: mpi_operator.mpijob(training(name)),
                     lambda plane, kubeconfig, ns, log: PeerRun(plane.env(), kubeconfig, ns, log, flags), missing)


def all_contenders() -> list[Contender]:
    return [kubetrain(), peer(tuned=False), peer(tuned=True)]


def process_cpu_seconds(pid: int) -> float:
    """The CPU seconds a running process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def process_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds so far, peak RSS in MiB) of a running process, from /proc."""
    peak = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:"))
    return process_cpu_seconds(pid), peak / 1024


