"""`kubetrain logs` and `Client.logs`: which launcher output to show, one rank's lines of it, and what to say when there
is none. Pure functions of plain data; kubetrain.logs_loop feeds them what the API server sends.

Attempts are numbered as status.attempt and the pods' `kubetrain.dev/attempt` label: the first is 0. The current
attempt's output is its launcher pod's log; an earlier attempt's is the copy the operator kept when it ended
(kubetrain.manifests.attempt_log)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain import follow
from kubetrain.contract import ROLE_LAUNCHER
from kubetrain.manifests.attempt_log import KEPT_ATTEMPTS
from kubetrain.plan.model import attempt_of

Obj = Mapping[str, Any]
# The rank tag at the start of a line, as the launcher's MPI writes it (images/entrypoints/lib/mpi.sh): Open MPI's
# `--tag-output` ("[1,0]<stdout>:", the job then the rank), MPICH's and Intel MPI's `-l` ("[0] "), horovodrun's
# ("[0]<stdout>:", an elastic job). The entrypoints' failure report reads the same tags: a unit test keeps them equal.
RANK_TAG = re.compile(r"\[(?:[^\],\[<>\s]+,)?(\d+)\](?:<(?:stdout|stderr|stddiag)>:| )")
# The time the kubelet puts before each line with timestamps=true (RFC 3339, fractions of a second to 9 digits).
STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z ")


class LogsNotFound(LookupError):
    """No launcher output to show: none started yet, the attempt's is not kept, or its log cannot be read."""


class NoRankTags(ValueError):
    """`--rank` was asked of output whose lines carry no rank tag."""


def current_attempt(body: Obj) -> int:
    return int((body.get("status") or {}).get("attempt") or 0)


def rank_of(line: str) -> int | None:
    """The rank a line of launcher output comes from, by its tag; None for a line without one (the launcher's own)."""
    tagged = RANK_TAG.match(line)
    return int(tagged.group(1)) if tagged else None


@dataclass
class RankFilter:
    """Keeps one rank's lines; remembers whether any line had a tag at all."""

    rank: int
    lines: int = 0
    tagged: int = 0

    def keeps(self, line: str) -> bool:
        found = rank_of(line)
        self.lines += 1
        self.tagged += found is not None
        return found == self.rank

    def check(self, namespace: str, name: str, attempt: int) -> None:
        """Raises NoRankTags when lines went by and none had a tag: then nothing can be told apart."""
        if self.lines and not self.tagged:
            raise NoRankTags(no_rank_tags(namespace, name, attempt))


def only_rank(text: str, rank: int, namespace: str, name: str, attempt: int) -> str:
    """The lines of `text` that rank `rank` wrote, tags kept."""
    kept = RankFilter(rank)
    lines = "".join(line for line in text.splitlines(keepends=True) if kept.keeps(line))
    kept.check(namespace, name, attempt)
    return lines


def lines_of(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a byte stream, without their newline, as soon as each is whole; a last line without a newline
    comes at the end. Bytes that are not UTF-8 are replaced."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from (line.decode(errors="replace") for line in whole)
    if pending:
        yield pending.decode(errors="replace")


def split_stamp(line: str) -> tuple[str, str]:
    """A line read with timestamps: its time, as text that sorts in time order, and the line as written."""
    found = STAMP.match(line)
    if found is None:
        return "", line
    return f"{found.group(1)}.{(found.group(2) or '').ljust(9, '0')}", line[found.end():]


@dataclass
class Resume:
    """Where a launcher pod's log was shown up to, so that a read of it from its start again shows nothing twice: the
    time of the last line shown, how many lines of that time were shown, and how many the current read brought."""

    stamp: str = ""
    same: int = 0
    replayed: int = 0

    def again(self) -> None:
        """A new read of the log starts from its beginning."""
        self.replayed = 0

    def fresh(self, stamp: str) -> bool:
        """Whether the line of time `stamp` (lines come in order) was not shown yet; from now on it has been."""
        if not stamp:
            return True
        if stamp > self.stamp:
            self.stamp, self.same, self.replayed = stamp, 1, 1
            return True
        if stamp < self.stamp:
            return False
        self.replayed += 1
        if self.replayed <= self.same:
            return False
        self.same += 1
        return True


def _launcher_state(pod: Obj) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((status.get("state") or {} for status in statuses if status.get("name") == ROLE_LAUNCHER), {})


def started(pod: Obj) -> bool:
    """Whether the launcher's container has started: only then has it a log."""
    state = _launcher_state(pod)
    return "running" in state or "terminated" in state


def ended(pod: Obj) -> bool:
    """Whether the launcher's container has ended: its log will not grow."""
    return "terminated" in _launcher_state(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def launcher_of(pods: Sequence[Obj], attempt: int) -> Obj | None:
    """The newest launcher pod of `attempt` whose container has started."""
    found = sorted((pod for pod in pods if attempt_of(pod) == attempt and started(pod)),
                   key=lambda pod: pod["metadata"].get("creationTimestamp") or "")
    return found[-1] if found else None


# What `kubetrain logs -f` does next, from the job and its launcher pods.


@dataclass(frozen=True)
class Stream:
    pod: Obj
    attempt: int


@dataclass(frozen=True)
class ShowCopy:
    """The job ended and its last attempt's launcher pod is gone: show what the operator kept of it."""

    attempt: int


@dataclass(frozen=True)
class Wait:
    """Nothing to show until the job changes."""


@dataclass(frozen=True)
class End:
    snap: follow.Snapshot


def follow_step(body: Obj, pods: Sequence[Obj], done: set[str], shown: set[int]) -> Stream | ShowCopy | Wait | End:
    """`done`: the uids of the launcher pods read to their end; `shown`: the attempts whose output was shown."""
    attempt, snap = current_attempt(body), follow.snapshot(body)
    pod = launcher_of([pod for pod in pods if pod["metadata"].get("uid") not in done], attempt)
    if pod is not None:
        return Stream(pod, attempt)
    if not snap.finished:
        return Wait()
    if attempt not in shown:
        return ShowCopy(attempt)
    return End(snap)


# One line each for what cannot be shown.


def no_launcher_yet(namespace: str, name: str, attempt: int, snap: follow.Snapshot) -> str:
    why = f" ({snap.reason}: {snap.message})" if snap.reason and snap.message else ""
    return f"no launcher pod of {namespace}/{name} (attempt {attempt}) has started: the job is {snap.phase}{why}"


def attempt_not_found(namespace: str, name: str, attempt: int, current: int, kept: Sequence[int]) -> str:
    """`kept`: the attempts whose output can be shown (the copies, and the current attempt's launcher pod)."""
    shown = ", ".join(str(number) for number in sorted(kept))
    where = f"the output of attempt(s) {shown} is kept" if kept else "no attempt's launcher output is kept"
    return (f"attempt {attempt} of {namespace}/{name} not found: the job is at attempt {current}; {where} (the "
            f"operator keeps the last {KEPT_ATTEMPTS} failed attempts')")


def unreadable(namespace: str, name: str, attempt: int, pod: str, reason: str) -> str:
    return f"the launcher log of {namespace}/{name} (attempt {attempt}, pod {pod}) cannot be read: {reason}"


def not_kept(namespace: str, name: str, attempt: int, note: str) -> str:
    return f"attempt {attempt} of {namespace}/{name} left no launcher output: {note}"


def no_rank_tags(namespace: str, name: str, attempt: int) -> str:
    return (f"--rank cannot filter attempt {attempt} of {namespace}/{name}: no line of its launcher output starts "
            "with a rank tag ('[1,0]<stdout>:' from Open MPI, '[0] ' from MPICH and Intel MPI, '[0]<stdout>:' from "
            "horovodrun): a launcher from before the tags wrote none")
