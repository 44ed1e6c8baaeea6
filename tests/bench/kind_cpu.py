"""CPU seconds of a kind cluster's processes, read from this machine's /proc: kind's nodes are containers here, so
their processes (the API server, etcd, a controller in a pod) are this machine's processes too. `docker top` names
them by node."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from .contenders import process_cpu_seconds


def is_control_plane(args: str) -> bool:
    """The command line of the API server or etcd."""
    return args.split(" ", 1)[0].rsplit("/", 1)[-1] in ("kube-apiserver", "etcd")


def is_kubetrain_operator(args: str) -> bool:
    """The command line of the chart's operator (images/operator)."""
    return "kopf run" in args and "kubetrain.reconcile" in args


CONTROL_PLANE: Mapping[str, Callable[[str], bool]] = {"API server and etcd": is_control_plane}


def node_processes(docker: str, cluster: str) -> list[tuple[int, str]]:
    """(pid, command line) of every process in the cluster's node containers."""
    nodes = subprocess.run([docker, "ps", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format",
                            "{{.Names}}"], capture_output=True, text=True, check=True, timeout=60).stdout.split()
    found = []
    for node in nodes:
        table = subprocess.run([docker, "top", node, "-eo", "pid,args"], capture_output=True, text=True, check=True,
                               timeout=60).stdout.splitlines()[1:]
        for line in table:
            pid, _, args = line.strip().partition(" ")
            if pid.isdigit():
                found.append((int(pid), args.strip()))
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """The CPU seconds these processes have used so far (a process gone since counts nothing)."""
    total = 0.0
    for pid in pids:
        try:
            total += process_cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class CpuMeter:
    """CPU seconds of named groups of processes between `start()` and `stop()`: the cluster's, each group those whose
    command line passes its test in `tests`, and `outside`'s, given by pid."""

    def __init__(self, docker: str, cluster: str, tests: Mapping[str, Callable[[str], bool]],
                 outside: Mapping[str, Sequence[int]] | None = None) -> None:
        self.docker, self.cluster, self.tests, self.outside = docker, cluster, tests, outside or {}
        self._before: dict[str, float] = {}
        self._pids: dict[str, list[int]] = {}

    def start(self) -> None:
        processes = node_processes(self.docker, self.cluster)
        self._pids = {**{name: [pid for pid, args in processes if test(args)] for name, test in self.tests.items()},
                      **{name: list(pids) for name, pids in self.outside.items()}}
        self._before = {name: cpu_seconds(pids) for name, pids in self._pids.items()}

    def stop(self) -> dict[str, float]:
        """Each group's CPU seconds since `start()`."""
        return {name: round(cpu_seconds(pids) - self._before[name], 2) for name, pids in self._pids.items()}
