"""What a run that ran out of time was doing: each rank's last lines and the stack of every process still alive.

A `horovodrun` job is a tree of processes: horovodrun, its middleman (in a session of its own, so a kill of
horovodrun's process group misses it), mpirun or the Gloo launcher, and the ranks. `stop_hung` walks that tree,
dumps every process's stack (py-spy for Python, the kernel's wait channel for the others), then kills the whole
tree, so the caller can still read all the output the run had written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psutil

PY_SPY = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
# horovodrun's prefix: [rank]<stream>: under Gloo, [job,rank]<stream>: under MPI.
RANK_PREFIX = re.compile(r"^\[(?:\d+,)?(\d+)\]<(?:stdout|stderr)>:")
TAIL_LINES = 20


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are still alive, parents first."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def describe(process: psutil.Process) -> str:
    """One process: its pid, state and command line, then its stack (Python) or what it waits on in the kernel."""
    try:
        command = " ".join(process.cmdline())[:300]
        head = f"--- pid {process.pid} ({process.status()}): {command}"
        wchan = Path(f"/proc/{process.pid}/wchan").read_text().strip() or "-"
    except (psutil.Error, OSError) as error:
        return f"--- pid {process.pid}: gone ({error})"
    if PY_SPY is None or "python" not in Path(command.split(" ")[0]).name:
        return f"{head}\n    waits in the kernel at {wchan}"
    try:
        dump = subprocess.run([PY_SPY, "dump", "--native", "--pid", str(process.pid)], capture_output=True,
                              text=True, timeout=60)
        stack = (dump.stdout + dump.stderr).strip()
    except subprocess.TimeoutExpired:
        stack = "py-spy did not answer in 60 s"
    return f"{head}\n{stack}"


def stacks(processes: list[psutil.Process]) -> str:
    """Every process's description, one after the other."""
    return "\n".join(describe(process) for process in processes) or "(no process of the run was still alive)"


def kill(processes: list[psutil.Process]) -> None:
    """SIGKILL every process and wait for it to go."""
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=30)


def rank_tails(output: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of each rank (by horovodrun's prefix), and of the launcher's own lines."""
    by_source: dict[str, list[str]] = defaultdict(list)
    for line in output.splitlines():
        match = RANK_PREFIX.match(line)
        by_source[f"rank {match.group(1)}" if match else "launcher"].append(line)
    if not by_source:
        return "(the run printed nothing)"
    return "\n".join(f"== {source}, last {min(lines, len(found))} of {len(found)} lines:\n" + "\n".join(found[-lines:])
                     for source, found in sorted(by_source.items()))


def stop_hung(process: subprocess.Popen) -> tuple[str, str, str]:
    """Dump the stacks of a run that is still running, kill its whole tree, and return (stacks, stdout, stderr)."""
    tree = process_tree(process.pid)
    report = stacks(tree)
    kill(tree)
    stdout, stderr = process.communicate()
    return report, stdout or "", stderr or ""


def hung_report(command: str, timeout: float, stack_report: str, stdout: str, stderr: str) -> str:
    """The message a test fails with when its run did not finish in time (`stderr` empty: one stream, or a log)."""
    printed = (f"what each rank printed (stdout):\n{rank_tails(stdout)}\n"
               f"what each rank printed (stderr):\n{rank_tails(stderr)}\n") if stderr else \
        f"what each rank printed:\n{rank_tails(stdout)}\n"
    return (f"timed out after {timeout:.0f}s: {command}\n{printed}"
            f"stacks of the processes still alive at the timeout:\n{stack_report}")
