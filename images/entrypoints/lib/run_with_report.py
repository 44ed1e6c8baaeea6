"""Runs the launcher's MPI or horovodrun command and, when it fails, writes which rank failed to the termination log.

Usage: python run_with_report.py FLAVOR TERMINATION_LOG COMMAND...   (run by lib/launcher.sh, in place of an exec)

The command's stdout and stderr pass through unchanged, as they come: each read is written at once, unbuffered, to
the same stream of this process (the container's log). A copy feeds lib/failure_report.py, which keeps each rank's
last lines. When the command exits non-zero, its report (one line of JSON, at most 4096 bytes) goes to
TERMINATION_LOG, the container's terminationMessagePath: the operator puts it in the job's status. Exits with the
command's code (128 + N when a signal N ended it).
SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to the command, which stops its ranks. As a
container's process 1 it also reaps the orphans that end up with it.
Standard library only, Python 3.7 or newer: it runs in the job's image.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import sys
import time

from failure_report import RankOutput, describe, encode, report

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
READ_BYTES = 65536
# Once the command has exited, output still in flight is read for this long: a process it left behind (an ssh that
# outlives mpirun) may hold the pipes open for ever.
DRAIN_SECONDS = 2.0
POLL_SECONDS = 0.2


def log(message: str) -> None:
    sys.stderr.write(f"kubetrain launcher: {message}\n")
    sys.stderr.flush()


def write_all(fd: int, data: bytes) -> None:
    """Writes every byte, or gives up quietly when nobody reads any more (the command must never block on us)."""
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal's number."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Run:
    """The command, its output pumped to ours, its exit status once it is known."""

    def __init__(self, flavor: str) -> None:
        self.output = RankOutput(flavor)
        self.child: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.status: int | None = None
        self.early: list[int] = []  # signals that came before the command started
        self.selector = selectors.DefaultSelector()

    def start(self, command: list[str]) -> None:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Kept for as long as this runs: a Popen that is let go polls its process, and reaps it if it has ended
        # (a command that exits at once), before reap() can see its status.
        self.child = child
        self.pid = child.pid
        for pipe, stream in ((child.stdout, "stdout"), (child.stderr, "stderr")):
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            target = sys.stdout.fileno() if stream == "stdout" else sys.stderr.fileno()
            self.selector.register(pipe, selectors.EVENT_READ, (stream, target, decoder))  # type: ignore[arg-type]
        for number in self.early:
            self.forward(number, None)

    def forward(self, number: int, _frame: object) -> None:
        """Passes a signal on to the command (os.kill: Popen's own methods would reap it behind our back)."""
        if self.pid is None:
            self.early.append(number)
        elif self.status is None:
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass

    def pump(self) -> int:
        """Copies the output until the command has exited and its pipes are drained; returns its exit code."""
        drain_until: float | None = None
        while self.selector.get_map():
            for key, _ in self.selector.select(POLL_SECONDS):
                stream, target, decoder = key.data
                data = os.read(key.fd, READ_BYTES)
                if not data:
                    self.selector.unregister(key.fileobj)
                    self.output.feed(stream, decoder.decode(b"", final=True))
                    continue
                write_all(target, data)
                self.output.feed(stream, decoder.decode(data))
            self.reap()
            if self.status is not None and drain_until is None:
                drain_until = time.monotonic() + DRAIN_SECONDS
            if drain_until is not None and time.monotonic() > drain_until:
                break
        while self.status is None:
            self.reap(block=True)
        self.output.close()
        return exit_code(self.status)

    def reap(self, block: bool = False) -> None:
        """Collects the command's exit status, and any orphan's, without waiting unless `block`."""
        while self.status is None:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:  # nothing left to wait for: only if someone else reaped the command
                self.status = self.status if self.status is not None else 255 << 8
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = status


def main() -> int:
    if len(sys.argv) < 4:
        log("usage: run_with_report.py FLAVOR TERMINATION_LOG COMMAND...")
        return 2
    flavor, termination_log, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    run = Run(flavor)
    for number in FORWARDED:
        signal.signal(number, run.forward)
    try:
        run.start(command)
    except OSError as error:
        log(f"cannot run {command[0]}: {error}")
        return 127
    code = run.pump()
    if code != 0:
        found = report(run.output, code)
        log(describe(found))
        try:
            with open(termination_log, "wb") as file:
                file.write(encode(found))
        except OSError as error:
            log(f"cannot write the failure report to {termination_log}: {error}")
    return code


if __name__ == "__main__":
    sys.exit(main())
