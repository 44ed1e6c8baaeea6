"""What status.failure says about a failed attempt: which rank failed, in which pod on which node, how, and its last
lines. From the launcher's failure report (its termination message) or from a failed pod's own state. Pure.

The launcher's entrypoint writes the report (images/entrypoints/lib/run_with_report.py). The operator reads it as
untrusted data: the job's image, and a rank running on the launcher, can write anything there. So it is bounded,
its control characters go, a rank counts only within the job's ranks, a host only as one of the job's own pods, and
its lines are shown as what the rank printed, never as the operator's own words.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import Job
from kubetrain.contract import (
    FAILURE_LINE_CHARS,
    FAILURE_LINES,
    FAILURE_LINES_BYTES,
    FAILURE_REPORT_KIND,
    TERMINATION_MESSAGE_BYTES,
    worker_name,
)
from kubetrain.manifests.names import elastic_hostnames, launcher_hostname, rank_hostnames

Obj = Mapping[str, Any]
# How a report knows the rank (status.failure.rankFrom).
RANK_FROM_MPI = "MPI"  # the MPI's own summary named it
RANK_FROM_LAST_OUTPUT = "LastOutput"  # guessed: the rank whose output ended last
RANK_FROM_HOSTFILE = "Hostfile"  # the failed pod holds that one rank (hostfile order)
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
LINE_BREAKS = re.compile(r"\r\n|\n")


def clean_line(text: str, limit: int = FAILURE_LINE_CHARS) -> str:
    """One printed line made safe to show: what a terminal leaves of it (after its last carriage return), without
    escape sequences, control or format characters (bidirectional overrides, zero widths) or trailing blanks, at
    most `limit` characters."""
    text = text.rstrip("\r")
    text = ANSI_ESCAPE.sub("", text[text.rfind("\r") + 1:]).replace("\t", " ")
    text = "".join(char for char in text if unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    text = text.rstrip()  # indentation stays: a traceback's says which line is which
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def clean_lines(lines: Iterable[Any]) -> tuple[str, ...]:
    """The last lines, made safe, that fit FAILURE_LINES and FAILURE_LINES_BYTES; blank lines and non-text left out."""
    kept: list[str] = []
    size = 0
    texts = [clean_line(line) for line in lines if isinstance(line, str)]
    for line in reversed([line for line in texts if line][-FAILURE_LINES:]):
        size += len(line.encode()) + 1
        if size > FAILURE_LINES_BYTES:
            break
        kept.append(line)
    return tuple(reversed(kept))


@dataclass(frozen=True)
class LauncherReport:
    """The launcher's failure report, as read (every field checked, lines made safe)."""

    rank: int | None
    rank_from: str | None
    host: str | None
    exit_code: int | None
    signal: str | None
    lines_of_rank: bool  # the lines are the rank's; else the launcher's own (the MPI's messages)
    last_lines: tuple[str, ...]


def read_report(message: str | None) -> LauncherReport | None:
    """The report in a termination message, or None when the message is not one (the log's tail, or empty)."""
    if not message or len(message.encode()) > TERMINATION_MESSAGE_BYTES:
        return None
    try:
        found = json.loads(message)
    except ValueError:
        return None
    if not isinstance(found, dict) or found.get("kind") != FAILURE_REPORT_KIND:
        return None
    rank = _count(found.get("rank"))
    rank_from = found.get("rankFrom") if found.get("rankFrom") in (RANK_FROM_MPI, RANK_FROM_LAST_OUTPUT) else None
    host = found.get("host")
    signal = found.get("signal")
    lines = found.get("lastLines")
    return LauncherReport(
        rank=rank,
        rank_from=rank_from if rank is not None else None,
        host=host if isinstance(host, str) and re.fullmatch(r"[A-Za-z0-9.-]{1,253}", host) else None,
        exit_code=_count(found.get("exitCode")),
        signal=clean_line(signal, 40) or None if isinstance(signal, str) else None,
        lines_of_rank=found.get("linesOf") == "rank" and rank is not None,
        last_lines=clean_lines(lines if isinstance(lines, list) else []),
    )


def log_tail(message: str | None) -> tuple[str, ...]:
    """A termination message that is no report (the log's tail, kubelet's FallbackToLogsOnError) as last lines."""
    return clean_lines(LINE_BREAKS.split(message or ""))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31 else None


@dataclass(frozen=True)
class Placement:
    """Where the attempt's ranks run: each rank's host (hostfile order), and each host's pod and node."""

    rank_hosts: tuple[str, ...] = ()  # by rank; empty when the order is Horovod's own (elastic)
    ranks: int = 0  # how many ranks the attempt may have
    pods: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)  # host -> (pod, node)

    def of_rank(self, rank: int | None) -> tuple[str, str | None] | None:
        if rank is None or rank >= len(self.rank_hosts):
            return None
        return self.pods.get(self.rank_hosts[rank])

    def of_host(self, host: str | None) -> tuple[str, str | None] | None:
        return self.pods.get(host.split(".")[0]) if host else None

    def rank_of_pod(self, pod: str) -> int | None:
        """The rank a pod runs, when it runs exactly one."""
        held = [rank for rank, host in enumerate(self.rank_hosts) if self.pods.get(host, ("",))[0] == pod]
        return held[0] if len(held) == 1 else None


def placement(job: Job, workers: Mapping[int, Obj], launcher_pod: Obj | None) -> Placement:
    """The attempt's placement from its pods: ranks fill the hostfile's hosts in order, slotsPerWorker each."""
    pods = {worker_name(job.name, index): _pod_and_node(pod) for index, pod in workers.items()}
    if launcher_pod is not None:
        pods[launcher_hostname(job)] = _pod_and_node(launcher_pod)
    slots = job.spec.slots_per_worker
    if job.spec.elastic is not None:
        return Placement((), len(elastic_hostnames(job)) * slots, pods)
    hosts = tuple(host.split(".")[0] for host in rank_hostnames(job) for _ in range(slots))
    return Placement(hosts, len(hosts), pods)


def _pod_and_node(pod: Obj) -> tuple[str, str | None]:
    return str(pod["metadata"]["name"]), (pod.get("spec") or {}).get("nodeName")


@dataclass(frozen=True)
class FailureDetail:
    """status.failure: the failing rank, its pod and node, how it ended, and its last lines."""

    reason: str  # Error, Signal, or the kubelet's: OOMKilled, Evicted, ...
    exit_code: int | None = None
    signal: str | None = None
    rank: int | None = None
    rank_from: str | None = None
    pod: str | None = None
    node: str | None = None
    last_lines: tuple[str, ...] = ()
    lines_from: str | None = None  # whose lines: "rank 1", "the launcher", "worker pod x-worker-1"
    detail: str | None = None  # the kubelet's words for a pod it took away (Evicted: ...)
    reported: bool = False  # from the launcher's failure report (the MPI command ran and failed)

    @property
    def how(self) -> str:
        """How it ended, in a few words: `Error (exit code 3)`, `killed by signal 9 (Killed), exit code 137`."""
        if self.signal:
            return f"killed by signal {self.signal}" + (f", exit code {self.exit_code}" if self.exit_code else "")
        code = f" (exit code {self.exit_code})" if self.exit_code is not None else ""
        return f"{self.reason}{code}" + (f": {self.detail}" if self.detail else "")

    @property
    def where(self) -> str:
        """`in pod x-worker-1 on node n1`, as far as known."""
        words = [f"in pod {self.pod}" if self.pod else "", f"on node {self.node}" if self.node else ""]
        return " ".join(word for word in words if word)

    def headline(self, role: str, name: str) -> str:
        """One line: `rank 1 failed in pod x-worker-1 on node n1: Error (exit code 3)`, or `<role> pod <name>
        failed: ...` when no rank is known. Without a rank, an exit code's last line of output is quoted."""
        if self.rank is not None and self.rank_from != RANK_FROM_HOSTFILE:
            guessed = ""
            if self.rank_from == RANK_FROM_LAST_OUTPUT:
                guessed = " (its output ended last; the MPI named no rank)"
            return f"rank {self.rank}{guessed} failed{' ' + self.where if self.where else ''}: {self.how}"
        text = f"{role} pod {name} failed: {self.how}"
        if self.node and self.pod == name:
            text += f" on node {self.node}"
        elif self.where:
            text += f", {self.where}"
        if self.rank is not None:
            text += f" (rank {self.rank})"
        if self.last_lines and self.reason == "Error" and self.rank is None:
            text += f'; last line: "{self.last_lines[-1]}"'
        return text

    def status(self, attempt: int) -> dict[str, Any]:
        """The status.failure object of `attempt`. Unknown fields are None: the status is merge-patched, so that
        clears what an earlier attempt's failure said."""
        return {"attempt": attempt, "rank": self.rank, "rankFrom": self.rank_from, "pod": self.pod,
                "node": self.node, "exitCode": self.exit_code, "signal": self.signal, "reason": self.reason,
                "lastLines": list(self.last_lines), "linesFrom": self.lines_from}

    def event_message(self, headline: str, limit: int) -> str:
        """`headline`, then as many of the last lines as fit `limit` characters, each shown as printed text."""
        if not self.last_lines:
            return headline[:limit]
        head = f"{headline}\nlast lines of {self.lines_from}:"
        shown: list[str] = []
        size = len(head)
        for line in reversed(self.last_lines):
            size += len(line) + 5
            if size > limit:
                break
            shown.append(f"\n  | {line}")
        return head[:limit] if not shown else head + "".join(reversed(shown))


def from_launcher(report: LauncherReport, where: Placement, launcher_exit: int | None) -> FailureDetail:
    """The failure a launcher's report names: the rank only within the attempt's ranks, its pod from the hostfile
    order, or from the host the MPI named (one of the job's pods); a guess that contradicts that host is dropped."""
    rank = report.rank if report.rank is not None and report.rank < where.ranks else None
    by_rank, by_host = where.of_rank(rank), where.of_host(report.host)
    if rank is not None and report.rank_from == RANK_FROM_LAST_OUTPUT and by_host and by_rank and by_host != by_rank:
        rank, by_rank = None, None
    pod, node = by_host or by_rank or (None, None)
    exit_code = report.exit_code if report.exit_code is not None else launcher_exit
    lines_of_rank = report.lines_of_rank and rank is not None
    return FailureDetail(
        reason="Signal" if report.signal else "Error",
        exit_code=exit_code,
        signal=report.signal,
        rank=rank,
        rank_from=report.rank_from if rank is not None else None,
        pod=pod,
        node=node,
        last_lines=report.last_lines,
        lines_from=(f"rank {rank}" if lines_of_rank else "the launcher") if report.last_lines else None,
        reported=True,
    )


def from_pod(pod: Obj, role: str, where: Placement, terminated: Obj | None) -> FailureDetail:
    """A pod that failed as a whole (OOMKilled, evicted, an exit code), from its own state; `terminated` is its main
    container's terminated state, if any. Its termination message (the log's tail) gives the last lines."""
    name, node = _pod_and_node(pod)
    status = pod.get("status") or {}
    terminated = terminated or {}
    rank = where.rank_of_pod(name)
    lines = log_tail(terminated.get("message"))
    kubelet_reason = status.get("reason")
    return FailureDetail(
        reason=clean_line(str(kubelet_reason or terminated.get("reason") or "Error"), 60),
        exit_code=_count(terminated.get("exitCode")),
        rank=rank,
        rank_from=RANK_FROM_HOSTFILE if rank is not None else None,
        pod=name,
        node=node,
        last_lines=lines,
        lines_from=f"{role} pod {name}" if lines else None,
        detail=clean_line(str(status.get("message") or ""), 300) or None if kubelet_reason else None,
    )
