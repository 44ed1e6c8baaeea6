"""The thin loops of `kubetrain status [--watch]` and `kubetrain wait`: follow the job, print what
kubetrain.follow decides, exit as it says. `watch_changes` is the loop `kubetrain wait` and kubetrain.client share."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from kubetrain import follow
from kubetrain.kube import Cluster, follow_training
from kubetrain.report import format_status


class JobNotFound(LookupError):
    """The job to follow does not exist."""


def error(message: str) -> None:
    print(f"kubetrain: error: {message}", file=sys.stderr)


def snapshots(bodies: Iterator[dict[str, Any] | None]) -> Iterator[follow.Snapshot | None]:
    return (None if body is None else follow.snapshot(body) for body in bodies)


def show_status(cluster: Cluster, namespace: str, name: str, watch: bool = False) -> int:
    """Print the status; with `watch`, then a line per change until the job finishes, and exit as it ended."""
    bodies = follow_training(cluster, namespace, name)
    body = next(bodies)
    if body is None:
        error(follow.not_found(namespace, name))
        return follow.EXIT_USAGE
    sys.stdout.write(format_status(body))
    sys.stdout.flush()
    if not watch:
        return 0
    first = follow.snapshot(body)
    last: follow.Snapshot | None = first
    with bar_or_lines(first) as bar:
        for last in follow.changes(snapshots(bodies), first):
            if last is None:
                break
            text = follow.line(last, datetime.now(timezone.utc))
            if bar is None:
                print(text, flush=True)
            else:
                bar.show(last, text)
    return ended(namespace, name, last)


def bar_or_lines(first: follow.Snapshot) -> contextlib.AbstractContextManager[Any]:
    """The epoch bar on a terminal (unless the job already finished), else nothing: plain lines."""
    if first.finished or not sys.stdout.isatty():
        return contextlib.nullcontext()
    from kubetrain.progress_bar import EpochBar

    return EpochBar(first)


def ended(namespace: str, name: str, last: follow.Snapshot | None) -> int:
    """The exit code for how the job ended; a job that is gone says so on stderr."""
    if last is None:
        error(follow.deleted(namespace, name))
    code = follow.exit_code(last)
    return follow.EXIT_USAGE if code is None else code


def watch_changes(cluster: Cluster, namespace: str, name: str,
                  timeout: float | None = None) -> Iterator[follow.Snapshot | None]:
    """The job's snapshot now, then each change until it finishes; None when it was deleted first.

    Raises JobNotFound when there is no such job, TimeoutError once `timeout` seconds have passed.
    """
    bodies = follow_training(cluster, namespace, name, timeout)
    body = next(bodies)
    if body is None:
        raise JobNotFound(follow.not_found(namespace, name))
    first = follow.snapshot(body)
    yield first
    yield from follow.changes(snapshots(bodies), first)


def wait_for(cluster: Cluster, namespace: str, name: str, timeout: float | None) -> int:
    """Nothing until the job finishes, then one line; 124 and a line on stderr when `timeout` passes first."""
    last: follow.Snapshot | None = None
    try:
        for change in watch_changes(cluster, namespace, name, timeout):
            last = change
    except JobNotFound as missing:
        error(str(missing))
        return follow.EXIT_USAGE
    except TimeoutError:
        error(follow.timed_out(namespace, name, timeout or 0, last))
        return follow.EXIT_TIMEOUT
    if last is not None:
        print(follow.summary(namespace, name, last), flush=True)
    return ended(namespace, name, last)
