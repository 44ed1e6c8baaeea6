"""What a failed MPI or horovodrun run says about itself: which rank failed, how, and its last lines.

Pure: fed the launcher's output as it streams (lib/run_with_report.py feeds it), it returns the failure report the
launcher writes to its termination message. No file, process or clock is touched here.

The ranks' output reaches the launcher with a tag per write: `[1,0]<stdout>:` (Open MPI's --tag-output, a space
after the colon in Open MPI 5), `[0] ` (MPICH and Intel MPI's -l), `[0]<stdout>:` (horovodrun). A tag may come in
the middle of a line: a write without a newline ends where the next write, maybe of another rank, begins. So each
rank's lines are put together from its own pieces. Text without a tag at the start of a line is the MPI's own.

Which rank failed: the MPI's own summary says so where it prints one (Open MPI's "Process name: [[x,y],R]" and
"Exit code: N" or "process rank R ... exited on signal S", horovodrun's "Process R exit with status code N",
Hydra's "BAD TERMINATION" with "EXIT CODE: N"). Else the rank whose output ended last, and the report says so.
Standard library only, Python 3.7 or newer: it runs in the job's image.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

# The report's bounds. kubetrain.contract has the same numbers (tests/unit/images/test_failure_report.py checks).
MAX_LINES = 20
MAX_LINE_CHARS = 200
MAX_LINES_BYTES = 2048
TERMINATION_MESSAGE_BYTES = 4096  # what Kubernetes keeps of a container's termination message
REPORT_KIND = "kubetrain.dev/failure-report/v1"
# What the parse keeps: the MPI's own last lines (its summary is among them), and a line not ended after this long.
OWN_LINES = 200
MAX_PENDING_CHARS = 16384

# A rank's tag, by the launcher's flavor (lib/mpi.sh's kt_mpi_flavor, or elastic for horovodrun).
OPEN_MPI_4_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")
OPEN_MPI_5_TAG = re.compile(r"\[[^\[\]\s,]+,(\d+)\]<std(?:out|err)>: ")
HYDRA_TAG = re.compile(r"\[(\d+)\] ")
HOROVOD_TAG = re.compile(r"\[(\d+)\]<std(?:out|err)>:")
TAGS = {"openmpi4": OPEN_MPI_4_TAG, "openmpi5": OPEN_MPI_5_TAG, "mpich": HYDRA_TAG, "intelmpi": HYDRA_TAG,
        "elastic": HOROVOD_TAG}

# The MPIs' own words (real samples: tests/unit/images/mpi_output/).
OPEN_MPI_EXIT = re.compile(r"Process name:\s*\[(?:\[\d+,\d+\]|[^\[\]\s,]+),(\d+)\]\s*Exit code:\s*(\d+)")
OPEN_MPI_SIGNAL = re.compile(
    r"noticed that process rank (\d+) with PID \d+ on node (\S+) exited on\s+signal (\d+)(?: \(([^)\n]*)\))?")
HOROVOD_EXIT = re.compile(r"^Process (\d+) exit with status code (\d+)\.", re.MULTILINE)
HOROVOD_HOST = re.compile(r"^Process name: (\S+)\[\d+\]\s*Exit code: (\d+)", re.MULTILINE)
HYDRA_EXIT = re.compile(
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\s*(?:RANK (\d+) )?PID \d+ RUNNING AT (\S+)\s*"
    r"EXIT CODE: (\d+)")
HYDRA_SIGNAL_STRING = re.compile(r"EXIT STRING: ([^\n]*?)\s*\(signal (\d+)\)")
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# C0 and C1 controls, DEL, and the marks that reorder or hide text (bidirectional overrides, zero width).
CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def clean_line(text: str) -> str:
    """One line as a terminal would leave it (the text after its last carriage return), without escapes or
    control characters, at most MAX_LINE_CHARS."""
    text = text.rstrip("\r")
    text = text[text.rfind("\r") + 1:]
    text = CONTROLS.sub("", ANSI_ESCAPE.sub("", text).replace("\t", " ")).rstrip()
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS - 1] + "\u2026"


@dataclass(frozen=True)
class Summary:
    """What the MPI said about the first process that failed; any field may be unknown."""

    rank: int | None = None
    host: str | None = None
    exit_code: int | None = None
    signal: str | None = None  # "9 (Killed)"


def mpi_summary(own_lines: list[str]) -> Summary:
    """The failing process as the MPI's own last lines name it (Summary() when they name none)."""
    text = "\n".join(line.strip(" =") for line in own_lines)
    found = OPEN_MPI_EXIT.search(text)
    if found:
        return Summary(rank=int(found.group(1)), exit_code=int(found.group(2)))
    found = OPEN_MPI_SIGNAL.search(text)
    if found:
        signal = found.group(3) + (f" ({found.group(4)})" if found.group(4) else "")
        return Summary(rank=int(found.group(1)), host=found.group(2), exit_code=128 + int(found.group(3)),
                       signal=signal)
    exited, named = HOROVOD_EXIT.search(text), HOROVOD_HOST.search(text)
    if named:
        return Summary(rank=int(exited.group(1)) if exited else None, host=named.group(1),
                       exit_code=int(named.group(2)))
    if exited:
        return Summary(rank=int(exited.group(1)), exit_code=int(exited.group(2)))
    found = HYDRA_EXIT.search(text)
    if found:
        rank = int(found.group(1)) if found.group(1) else None
        killed = HYDRA_SIGNAL_STRING.search(text)
        if killed:  # MPICH: EXIT CODE is the signal's number
            return Summary(rank=rank, host=found.group(2), exit_code=128 + int(killed.group(2)),
                           signal=f"{killed.group(2)} ({killed.group(1)})")
        return Summary(rank=rank, host=found.group(2), exit_code=int(found.group(3)))
    return Summary()


class RankOutput:
    """The last lines of each rank and of the MPI itself, from the launcher's output as it comes."""

    def __init__(self, flavor: str) -> None:
        if flavor not in TAGS:
            raise ValueError(f"unknown launcher flavor {flavor!r}: one of {', '.join(sorted(TAGS))}")
        self.tag = TAGS[flavor]
        self.ranks: dict[int, deque[str]] = {}
        self.own: deque[str] = deque(maxlen=OWN_LINES)
        self.last_rank: int | None = None  # the rank whose line ended last
        self._pending: dict[str, str] = {}  # stream -> text after its last newline
        self._pieces: dict[tuple[str, int | None], str] = {}  # (stream, rank) -> the rank's unfinished line

    def feed(self, stream: str, text: str) -> None:
        """Text as it came from `stream` (stdout or stderr)."""
        pending = self._pending.get(stream, "") + text
        *lines, rest = pending.split("\n")
        for line in lines:
            self._line(stream, line)
        if len(rest) > MAX_PENDING_CHARS:  # a bar that never ends its line: take it, keep what may be a tag
            self._pieces_of(stream, rest[:-64])
            rest = rest[-64:]
        self._pending[stream] = rest

    def close(self) -> None:
        """The streams ended: what is left unfinished counts as lines."""
        for stream, rest in list(self._pending.items()):
            if rest:
                self._line(stream, rest)
        self._pending.clear()
        for (_stream, rank), piece in list(self._pieces.items()):
            self._keep(rank, piece)
        self._pieces.clear()

    def _line(self, stream: str, line: str) -> None:
        """One line of a stream, its newline taken off: the pieces of one or more ranks, the last one ended."""
        owner = self._pieces_of(stream, line)
        self._keep(owner, self._pieces.pop((stream, owner), ""))

    def _pieces_of(self, stream: str, text: str) -> int | None:
        """Adds each tagged piece of `text` to its rank's unfinished line; returns the owner of the last piece."""
        owner: int | None = None
        start = 0
        for found in self.tag.finditer(text):
            if found.start() > start or owner is not None:
                self._add(stream, owner, text[start:found.start()])
            owner, start = int(found.group(1)), found.end()
        if start < len(text) or owner is None:
            self._add(stream, owner, text[start:])
        return owner

    def _add(self, stream: str, owner: int | None, piece: str) -> None:
        key = (stream, owner)
        self._pieces[key] = (self._pieces.get(key, "") + piece)[-4 * MAX_PENDING_CHARS:]

    def _keep(self, owner: int | None, raw: str) -> None:
        line = clean_line(raw)
        if not line:
            return
        if owner is None:
            self.own.append(line)
            return
        self.ranks.setdefault(owner, deque(maxlen=MAX_LINES)).append(line)
        self.last_rank = owner


def bounded(lines: list[str]) -> list[str]:
    """The last lines that fit MAX_LINES and MAX_LINES_BYTES."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-MAX_LINES:]):
        size += len(line.encode()) + 1
        if size > MAX_LINES_BYTES:
            break
        kept.append(line)
    return kept[::-1]


def report(output: RankOutput, exit_code: int) -> dict[str, Any]:
    """The failure report of a run that exited with `exit_code` (not 0)."""
    summary = mpi_summary(list(output.own))
    rank, rank_from = summary.rank, "MPI"
    if rank is None:
        rank, rank_from = output.last_rank, "LastOutput"
    lines = list(output.ranks.get(rank, ())) if rank is not None else []
    lines_of = "rank"
    if not lines:
        lines = [line for line in output.own if line.strip("-= ")]
        lines_of = "launcher"
    return {
        "kind": REPORT_KIND,
        "rank": rank,
        "rankFrom": rank_from if rank is not None else None,
        "host": summary.host,
        "exitCode": summary.exit_code if summary.exit_code is not None else exit_code,
        "signal": summary.signal,
        "linesOf": lines_of,
        "lastLines": bounded(lines),
    }


def encode(found: dict[str, Any]) -> bytes:
    """The report as one line of JSON within TERMINATION_MESSAGE_BYTES (oldest lines dropped to fit)."""
    found = dict(found, lastLines=list(found.get("lastLines") or []))
    while True:
        data = json.dumps(found, ensure_ascii=False, separators=(",", ":")).encode()
        if len(data) <= TERMINATION_MESSAGE_BYTES or not found["lastLines"]:
            return data[:TERMINATION_MESSAGE_BYTES]
        found["lastLines"].pop(0)


def describe(found: dict[str, Any]) -> str:
    """One line for the launcher's log: which rank failed and how."""
    how = f"was killed by signal {found['signal']}" if found.get("signal") else f"exited with code {found['exitCode']}"
    if found.get("rank") is None:
        return f"the run {how}; no rank is named"
    said = "the MPI says so" if found.get("rankFrom") == "MPI" else "its output ended last"
    return f"rank {found['rank']} {how} ({said})"
