"""The loops of `kubetrain logs`, shared with `Client.logs`: read an attempt's launcher output, or follow the job's
from attempt to attempt until it finishes. What to show and what to say is decided in kubetrain.logs."""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from kubetrain import follow, logs
from kubetrain.contract import ROLE_LAUNCHER
from kubetrain.follow_loop import JobNotFound, error
from kubetrain.kube import (
    Cluster,
    LogUnreadable,
    attempt_log,
    follow_pod_log,
    follow_training,
    kept_attempts,
    launcher_pods,
    list_training,
    pod_log,
)
from kubetrain.manifests.attempt_log import read_attempt_log

AGAIN_SECONDS = 1.0  # before a launcher log whose connection dropped is read again


@dataclass(frozen=True)
class Output:
    """An attempt's launcher output, and what its reader should know of it (what the kept copy lacks)."""

    attempt: int
    text: str
    note: str = ""


def read_logs(cluster: Cluster, namespace: str, name: str, attempt: int | None = None,
              rank: int | None = None) -> Output:
    """Attempt `attempt`'s launcher output (None: the current attempt's), only rank `rank`'s lines if given.

    Raises JobNotFound, logs.LogsNotFound (none yet, not kept, or unreadable) or logs.NoRankTags."""
    body, _ = list_training(cluster, namespace, name)
    if body is None:
        raise JobNotFound(follow.not_found(namespace, name))
    current = logs.current_attempt(body)
    wanted = current if attempt is None else attempt
    pods = launcher_pods(cluster, namespace, name)
    output = _from_pod(cluster, namespace, name, wanted, logs.launcher_of(pods, wanted))
    if output is None:
        output = _from_copy(cluster, namespace, name, wanted)
    if output is None and wanted == current:
        raise logs.LogsNotFound(logs.no_launcher_yet(namespace, name, wanted, follow.snapshot(body)))
    if output is None:
        shown = kept_attempts(cluster, namespace, name) + ([current] if logs.launcher_of(pods, current) else [])
        raise logs.LogsNotFound(logs.attempt_not_found(namespace, name, wanted, current, shown))
    return _ranked(output, rank, namespace, name)


def _from_pod(cluster: Cluster, namespace: str, name: str, attempt: int, pod: logs.Obj | None) -> Output | None:
    """The launcher pod's log; when it cannot be read, the kept copy if there is one, else LogsNotFound."""
    if pod is None:
        return None
    try:
        return Output(attempt, pod_log(cluster, namespace, pod["metadata"]["name"], ROLE_LAUNCHER).decode(
            errors="replace"))
    except LogUnreadable as unreadable:
        kept = _from_copy(cluster, namespace, name, attempt)
        if kept is None:
            raise logs.LogsNotFound(logs.unreadable(namespace, name, attempt, pod["metadata"]["name"],
                                                    str(unreadable))) from None
        return kept


def _from_copy(cluster: Cluster, namespace: str, name: str, attempt: int) -> Output | None:
    copy = attempt_log(cluster, namespace, name, attempt)
    if copy is None:
        return None
    tail = read_attempt_log(copy)
    if not tail.text and tail.note:
        raise logs.LogsNotFound(logs.not_kept(namespace, name, attempt, tail.note))
    return Output(attempt, tail.text, tail.note)


Line = tuple[int, str]  # (attempt, a line of its launcher output without its newline)


def follow_logs(cluster: Cluster, namespace: str, name: str,
                rank: int | None = None) -> Generator[Line | Output, None, follow.Snapshot]:
    """The current attempt's launcher output, line by line as it is written, then each next attempt's, until the job
    finishes; returns how it ended. A kept copy (of a finished job whose last launcher pod is gone) comes whole, as
    an Output. Raises JobNotFound (also when the job is deleted first), logs.LogsNotFound, logs.NoRankTags."""
    done: set[str] = set()  # the launcher pods read to their end, by uid
    shown: set[int] = set()  # the attempts whose output was shown
    reads: dict[str, tuple[logs.Resume, logs.RankFilter | None]] = {}
    while True:
        body, step = _next_step(cluster, namespace, name, done, shown)
        if isinstance(step, logs.End):
            return step.snap
        shown.add(step.attempt)
        if isinstance(step, logs.ShowCopy):
            kept = _from_copy(cluster, namespace, name, step.attempt)
            if kept is None and shown == {step.attempt}:
                raise logs.LogsNotFound(logs.no_launcher_yet(namespace, name, step.attempt, follow.snapshot(body)))
            if kept is not None:
                yield _ranked(kept, rank, namespace, name)
            continue
        pod = step.pod["metadata"]
        resume, kept_rank = reads.setdefault(str(pod["uid"]), (logs.Resume(), None if rank is None
                                                               else logs.RankFilter(rank)))
        try:
            yield from _stream(cluster, namespace, step, resume, kept_rank)
        except LogUnreadable as unreadable:
            if _still_there(cluster, namespace, name, step.pod):
                raise logs.LogsNotFound(logs.unreadable(namespace, name, step.attempt, pod["name"],
                                                        str(unreadable))) from None
        if _still_there(cluster, namespace, name, step.pod, running=True):
            time.sleep(AGAIN_SECONDS)  # the connection dropped: read again, not in a tight loop
            continue
        done.add(str(pod["uid"]))
        if kept_rank is not None:
            kept_rank.check(namespace, name, step.attempt)


def _next_step(cluster: Cluster, namespace: str, name: str, done: set[str], shown: set[int]
               ) -> tuple[logs.Obj, logs.Stream | logs.ShowCopy | logs.End]:
    """The job, and what to show of it next, once there is something (the job's watch wakes it on each change)."""
    for body in follow_training(cluster, namespace, name):
        if body is None:
            raise JobNotFound(follow.deleted(namespace, name) if shown else follow.not_found(namespace, name))
        step = logs.follow_step(body, launcher_pods(cluster, namespace, name), done, shown)
        if not isinstance(step, logs.Wait):
            return body, step
    raise AssertionError("a job's watch ends only with the job")


def _ranked(output: Output, rank: int | None, namespace: str, name: str) -> Output:
    if rank is None:
        return output
    return Output(output.attempt, logs.only_rank(output.text, rank, namespace, name, output.attempt), output.note)


def _stream(cluster: Cluster, namespace: str, step: logs.Stream, resume: logs.Resume,
            kept: logs.RankFilter | None) -> Iterator[Line]:
    """One read of the launcher pod's log from its start, to the container's end or a dropped connection: the lines
    not shown yet. Raises LogUnreadable."""
    resume.again()
    for line in logs.lines_of(follow_pod_log(cluster, namespace, step.pod["metadata"]["name"], ROLE_LAUNCHER)):
        stamp, text = logs.split_stamp(line)
        if resume.fresh(stamp) and (kept is None or kept.keeps(text)):
            yield step.attempt, text


def _still_there(cluster: Cluster, namespace: str, name: str, pod: logs.Obj, running: bool = False) -> bool:
    """Whether the launcher pod is still there (and, with `running`, its container has not ended): then a read that
    ended was a dropped connection, and the log is read again."""
    now = next((found for found in launcher_pods(cluster, namespace, name)
                if found["metadata"].get("uid") == pod["metadata"].get("uid")), None)
    return now is not None and not (running and logs.ended(now))


# The command


def show_logs(cluster: Cluster, namespace: str, name: str, attempt: int | None, rank: int | None,
              follow_on: bool) -> int:
    """`kubetrain logs`: the output on stdout, what a kept copy lacks and where one attempt ends on stderr. Exit 0
    (with -f: 0 if the job Succeeded, 1 if it Failed), 2 with one line on stderr when there is nothing to show."""
    try:
        if not follow_on:
            output = read_logs(cluster, namespace, name, attempt, rank)
            _write(output)
            return 0
        return _follow(cluster, namespace, name, rank)
    except (JobNotFound, logs.LogsNotFound, logs.NoRankTags) as failure:
        error(str(failure))
        return follow.EXIT_USAGE


def _write(output: Output) -> None:
    sys.stdout.write(output.text)
    sys.stdout.flush()
    if output.note:
        print(f"kubetrain: attempt {output.attempt}'s kept copy: {output.note}", file=sys.stderr)


def _follow(cluster: Cluster, namespace: str, name: str, rank: int | None) -> int:
    lines = follow_logs(cluster, namespace, name, rank)
    last: int | None = None
    while True:
        try:
            item = next(lines)
        except StopIteration as finished:
            code = follow.exit_code(finished.value)
            return follow.EXIT_USAGE if code is None else code
        attempt = item.attempt if isinstance(item, Output) else item[0]
        if last is not None and attempt != last:
            print(f"kubetrain: attempt {attempt} of {namespace}/{name} follows", file=sys.stderr, flush=True)
        last = attempt
        if isinstance(item, Output):
            _write(item)
        else:
            print(item[1], flush=True)
