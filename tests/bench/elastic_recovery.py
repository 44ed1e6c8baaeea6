"""Training lost per worker loss: a whole-job restart (static) against elastic Horovod, side by side.

Both modes train the same program on the same data with the same flags: cifar_mixup, 2 ranks of one thread each on
two host names of this machine (127.0.0.1 and localhost), batch 32, a commit every 50 batches (trainlib's default).
The data are random CIFAR-format images written through the program's own converter (`python -m cifar_mixup.convert
cifar10`). Each round runs, in turn:

- a clean run of each mode: the baseline;
- static: `horovodrun -np 2 -H 127.0.0.1:1,localhost:1 --gloo`. Rank 1 is killed with SIGKILL `kill_fraction` of
  the way into epoch 2. horovodrun exits non-zero, and the benchmark starts it again at once, as the operator's
  whole-job restart does. Rank 0 restores its checkpoint of epoch 1 and training goes on from epoch 2, step 0. A
  real restart also waits for new pods; this one does not, so static's loss here is its floor;
- elastic: horovodrun as kubetrain's launcher runs it (`--min-np 1 --max-np 2 --host-discovery-script`, cooldown
  5-10 s). The same kill at the same point. Rank 0 goes back to the last commit and trains on alone; rank 1's host
  comes back after its cooldown and the job grows to 2 ranks again at a commit.

Seconds lost: the wall time with the loss less the clean run's, the same mode's, from the same round. Wall time runs
from rank 0's `Epoch 2/N` line (in the first horovodrun) to its end of the last epoch. Before that line both runs do
the same work (start, epoch 1), and after it too (the held-out evaluation, the exit), so leaving both out keeps their
noise out. That noise is large: at the end of `fit` on 2 ranks, one rank's return from `model.fit` here sometimes
takes 10-20 s while the other waits in the evaluation's allreduce.

Batches redone: from where training resumed (rank 0's log: `training starts at epoch E` after the restart, `N ranks
train from epoch E, step S of T` after the reset) to the kill point, in steps of 2 ranks. The kill point is counted in
Horovod's own timeline (`HOROVOD_TIMELINE`, which rank 0 writes as it goes, in every run of both modes): each step
allreduces the first gradient once, and rank 1 is killed once `kill_fraction` of epoch 2's steps have begun theirs.

The static / elastic ratios lead: the rounds alternate the modes' order, and each ratio is of the two modes' medians
over the rounds (a round's own ratio swings wildly when its elastic loss is a few seconds of noise).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainlib.cli import DEFAULT_COMMIT_EVERY_BATCHES

from .datasets import write_cifar10_python
from .processes import HOROVODRUN, REPO, TIMEOUT, BenchError
from .report import Row
from .stats import median

SECTION = "6 elastic"
MODES = ("static", "elastic")
HOSTS = ("127.0.0.1", "localhost")  # two hosts to horovodrun, both this machine: it starts their ranks without ssh
RANKS = len(HOSTS)
KILLED_RANK = 1
KILL_EPOCH = 2  # epoch 1 also traces the graphs; epoch 2 is the first of the steady ones
COOLDOWN_SECONDS = (5, 10)  # horovodrun's --blacklist-cooldown-range, as tests/jobs runs it
TEST_ROWS = 320  # held-out rows: validation is a small part of an epoch
FLAGS = ("--batch-size", "32", "--seed", "1")
POLL_SECONDS = 0.02

EPOCH_BEGINS = re.compile(r"<stdout>:Epoch (\d+)/\d+$")
EPOCH_ENDS = re.compile(r"<stdout>:(\d+)/\1 - ")
RESTORED = re.compile(r"rank0 INFO trainlib\.resume: training starts at epoch (\d+) ")
RESUMED = re.compile(r"rank0 INFO trainlib\.elastic: (\d+) ranks train from epoch (\d+), step (\d+) of (\d+)$")
STEPS = re.compile(r"rank0 INFO cifar_mixup: (\d+) ranks; per rank \d+ training rows \((\d+) steps\)")
# Horovod's timeline (chrome://tracing JSON): a tensor's name is given once, then each of its operations by number.
FIRST_GRADIENT = re.compile(r'"pid": (\d+), "args": \{"name": "[^"]*HorovodAllreduce_grads_0"\}')
ALLREDUCE_BEGINS = re.compile(r'\{"ph": "B", "name": "ALLREDUCE", "ts": \d+, "pid": (\d+)\}')


@dataclass(frozen=True)
class Line:
    """One line of horovodrun's output, stamped when it arrived."""

    seconds: float  # since the run (its first horovodrun) started
    text: str


@dataclass(frozen=True)
class Position:
    """Where training is: `step` steps of `RANKS` ranks done in epoch `epoch` (1-based)."""

    epoch: int
    step: int


@dataclass(frozen=True)
class Resume:
    """One `N ranks train from epoch E, step S of T` line of an elastic run."""

    seconds: float
    ranks: int
    epoch: int
    step: int
    steps: int


@dataclass(frozen=True)
class Loss:
    """One run with a worker loss, against the same mode's clean run of the same round."""

    mode: str
    clean_seconds: float  # from rank 0's `Epoch 2/N` line to its end of the last epoch
    lossy_seconds: float  # the same with the loss: from the first horovodrun's `Epoch 2/N` line
    paused_seconds: float  # from the kill to training again
    kill: Position
    resume: Position
    steps_per_epoch: int
    ranks_after: tuple[int, ...] = ()  # elastic: the sizes it trained at after the loss, in order

    @property
    def lost_seconds(self) -> float:
        return self.lossy_seconds - self.clean_seconds

    @property
    def redone(self) -> int:
        return batches_redone(self.kill, self.resume, self.steps_per_epoch)


def batches_redone(kill: Position, resume: Position, steps_per_epoch: int) -> int:
    """Steps trained before the kill and trained again after it: from `resume` up to `kill`."""
    return (kill.epoch - resume.epoch) * steps_per_epoch + kill.step - resume.step


def epoch_lines(lines: Sequence[Line], epoch: int) -> tuple[Line, Line]:
    """Rank 0's last `Epoch E/N` line for `epoch` and the line that ends that epoch after it. An elastic run that
    resets inside an epoch trains the rest of it as a `fit` of its own, which prints `Epoch E/N` again."""
    found: tuple[Line, Line] | None = None
    began: Line | None = None
    for line in lines:
        if (begins := EPOCH_BEGINS.search(line.text)) and int(begins.group(1)) == epoch:
            began = line
        elif began is not None and EPOCH_ENDS.search(line.text):
            found, began = (began, line), None
    if found is None:
        raise BenchError(f"no begin and end of epoch {epoch} in the output")
    return found


class StepCounter:
    """The steps rank 0 has begun, read from Horovod's timeline file while it is written: every training step
    allreduces the first gradient once. `poll` reads what was added since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.steps = 0
        self._offset = 0
        self._pending = ""
        self._gradient: str | None = None  # the timeline's number for the first gradient

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return self.steps
        self._offset += len(data)
        self.feed(data.decode("ascii", errors="replace"))
        return self.steps

    def feed(self, text: str) -> None:
        """Count the first gradient's allreduces in `text`, the file's next part; an event cut off at its end waits
        for the next part."""
        text = self._pending + text
        cut = text.rfind("}") + 1
        complete, self._pending = text[:cut], text[cut:]
        if self._gradient is None and (named := FIRST_GRADIENT.search(complete)):
            self._gradient = named.group(1)
        if self._gradient is not None:
            self.steps += sum(1 for event in ALLREDUCE_BEGINS.finditer(complete)
                              if event.group(1) == self._gradient)


def steps_per_epoch(lines: Sequence[Line]) -> int:
    """Steps an epoch has at 2 ranks, from rank 0's `2 ranks; per rank R training rows (S steps)` line."""
    for line in lines:
        if (found := STEPS.search(line.text)) and int(found.group(1)) == RANKS:
            return int(found.group(2))
    raise BenchError(f"rank 0 never said how many steps an epoch of {RANKS} ranks has")


def restored_position(lines: Sequence[Line]) -> tuple[float, Position]:
    """Where a restarted static run began: the epoch after rank 0's checkpoint, step 0 (and when it said so)."""
    for line in lines:
        if found := RESTORED.search(line.text):
            return line.seconds, Position(int(found.group(1)), 0)
    raise BenchError("the restarted run never said where training starts")


def elastic_resumes(lines: Sequence[Line]) -> list[Resume]:
    return [Resume(line.seconds, *map(int, found.groups())) for line in lines if (found := RESUMED.search(line.text))]


def reset_position(resume: Resume, ranks_before: int) -> Position:
    """The commit an elastic reset went back to, in steps of `ranks_before` ranks: rank 0 counts the steps already
    done at the new size (`trainlib.elastic.steps_already_done`), so this converts them back."""
    return Position(resume.epoch, resume.step * resume.ranks // ranks_before)


def program_args(data: Path, checkpoints: Path, epochs: int) -> list[str]:
    return [sys.executable, "-m", "cifar_mixup", "--data-dir", str(data), "--checkpoint-dir", str(checkpoints),
            "--epochs", str(epochs), *FLAGS]


def static_command(data: Path, checkpoints: Path, epochs: int) -> list[str]:
    hosts = ",".join(f"{host}:1" for host in HOSTS)
    return [str(HOROVODRUN), "-np", str(RANKS), "-H", hosts, "--network-interface", "lo", "--gloo",
            *program_args(data, checkpoints, epochs)]


def elastic_command(discovery: Path, data: Path, checkpoints: Path, epochs: int) -> list[str]:
    return [str(HOROVODRUN), "-np", str(RANKS), "--min-np", "1", "--max-np", str(RANKS), "--host-discovery-script",
            str(discovery), "--network-interface", "lo", "--blacklist-cooldown-range", *map(str, COOLDOWN_SECONDS),
            "--gloo", *program_args(data, checkpoints, epochs)]


def write_discovery_script(directory: Path) -> Path:
    """A host discovery script that always lists both hosts, one slot each."""
    hosts = directory / "hosts.txt"
    hosts.write_text("".join(f"{host}:1\n" for host in HOSTS))
    script = directory / "discover-hosts.sh"
    script.write_text(f"#!/bin/sh\ncat '{hosts}'\n")
    script.chmod(0o755)
    return script


def job_environment() -> dict[str, str]:
    """The caller's environment without KUBETRAIN_* (no cluster here), as the jobs tier runs the programs, and one
    thread per rank: a rank is then one of the 2 cores, as a worker of a real job is one node, and the survivor of a
    loss trains at about half the speed (two ranks of two threads each on 2 cores train no faster than one)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBETRAIN_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONUNBUFFERED="1",
               TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
               OMP_NUM_THREADS="1")
    return env


class Launch:
    """One horovodrun in its own session; its output lines are stamped as they arrive and copied to `log`. Rank 0
    writes Horovod's timeline to `timeline`."""

    def __init__(self, command: Sequence[str], log: Path, started: float, timeline: Path) -> None:
        self.command = list(command)
        self.started = started
        self.lines: list[Line] = []
        environment = {**job_environment(), "HOROVOD_TIMELINE": str(timeline)}
        self.process = subprocess.Popen(self.command, cwd=REPO, env=environment, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, args=(log,), daemon=True)
        self._reader.start()

    def _read(self, log: Path) -> None:
        assert self.process.stdout is not None
        with open(log, "a") as handle:
            for text in self.process.stdout:
                self.lines.append(Line(time.monotonic() - self.started, text.rstrip("\n")))
                handle.write(text)

    def tail(self) -> str:
        return "\n".join(line.text for line in self.lines[-40:])

    def ended(self) -> bool:
        return self.process.poll() is not None

    def wait_for(self, pattern: re.Pattern[str], group: int, timeout: float = TIMEOUT) -> Line:
        """The first line matching `pattern` whose first group is `group`; BenchError if the run ends first."""
        deadline, seen = time.monotonic() + timeout, 0
        while True:
            ended = self.process.poll() is not None
            if ended:
                self._reader.join(timeout=10)
            for line in self.lines[seen:]:
                if (found := pattern.search(line.text)) and int(found.group(1)) == group:
                    return line
            seen = len(self.lines)
            if ended:
                raise BenchError(f"{' '.join(self.command)} exited {self.process.returncode} before "
                                 f"{pattern.pattern} ({group}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"no {pattern.pattern} ({group}) within {timeout:.0f}s:\n{self.tail()}")
            time.sleep(POLL_SECONDS)

    def finish(self, timeout: float = TIMEOUT) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise BenchError(f"{' '.join(self.command)} did not finish in {timeout:.0f}s:\n{self.tail()}") from None
        self._reader.join(timeout=30)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._reader.join(timeout=30)


def rank_processes(marker: str, rank: int) -> list[int]:
    """PIDs of the Python processes whose command line names `marker` (a run's own checkpoint directory) and whose
    environment has horovodrun's HOROVOD_RANK=`rank`."""
    found = []
    for pid in _processes_naming(marker):
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            program = os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0])
        except OSError:
            continue
        if program.startswith(b"python") and f"HOROVOD_RANK={rank}".encode() in environment:
            found.append(pid)
    return found


def _processes_naming(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def kill_leftovers(marker: str) -> None:
    """SIGKILL whatever a run started that is still alive (its command lines name `marker`)."""
    for pid in _processes_naming(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Round:
    """What one round's runs share: the data, the scratch directory, the epochs and the kill point."""

    data: Path
    directory: Path
    epochs: int
    kill_fraction: float
    clean_seconds: dict[str, float] = field(default_factory=dict)

    def command(self, mode: str, checkpoints: Path) -> list[str]:
        if mode == "static":
            return static_command(self.data, checkpoints, self.epochs)
        return elastic_command(write_discovery_script(self.directory), self.data, checkpoints, self.epochs)

    def launch(self, mode: str, run: str, started: float, timeline: str) -> Launch:
        """horovodrun for `mode`'s `run` (clean or loss): checkpoints in <mode>-<run>, output appended to
        <mode>-<run>.log, Horovod's timeline in `timeline`."""
        return Launch(self.command(mode, self.directory / f"{mode}-{run}"), self.directory / f"{mode}-{run}.log",
                      started, self.directory / timeline)

    def clean(self, mode: str) -> None:
        launch = self.launch(mode, "clean", time.monotonic(), f"{mode}-clean-timeline.json")
        try:
            code = launch.finish()
        finally:
            launch.stop()
            kill_leftovers(str(self.directory / f"{mode}-clean"))
        if code != 0:
            raise BenchError(f"the clean {mode} run exited {code}:\n{launch.tail()}")
        began = epoch_lines(launch.lines, KILL_EPOCH)[0]
        self.clean_seconds[mode] = epoch_lines(launch.lines, self.epochs)[1].seconds - began.seconds

    def lossy(self, mode: str) -> Loss:
        """Run `mode` with rank 1 killed at the kill point; a static run is started again until it finishes."""
        marker = str(self.directory / f"{mode}-loss")
        started = time.monotonic()
        first = self.launch(mode, "loss", started, f"{mode}-loss-timeline.json")
        launches = [first]
        try:
            began = first.wait_for(EPOCH_BEGINS, KILL_EPOCH)
            steps = steps_per_epoch(first.lines)
            counter = StepCounter(self.directory / f"{mode}-loss-timeline.json")
            while counter.poll() < (KILL_EPOCH - 1) * steps + round(self.kill_fraction * steps):
                if first.ended():
                    raise BenchError(f"the {mode} run ended before the kill point:\n{first.tail()}")
                time.sleep(POLL_SECONDS)
            victims = rank_processes(marker, KILLED_RANK)
            if len(victims) != 1:
                raise BenchError(f"expected one process of rank {KILLED_RANK}, found {victims}:\n{first.tail()}")
            os.kill(victims[0], signal.SIGKILL)
            killed = time.monotonic() - started
            kill = Position(KILL_EPOCH, counter.poll() - (KILL_EPOCH - 1) * steps)
            code = first.finish()
            if mode == "static":
                if code == 0:
                    raise BenchError(f"horovodrun exited 0 after rank {KILLED_RANK} was killed:\n{first.tail()}")
                kill_leftovers(marker)
                second = self.launch(mode, "loss", started, f"{mode}-restart-timeline.json")  # the whole-job restart
                launches.append(second)
                code = second.finish()
                resumed_at, resume = restored_position(second.lines)
                ranks_after: tuple[int, ...] = ()
            else:
                after = [reset for reset in elastic_resumes(first.lines) if reset.seconds > killed]
                if not after:
                    raise BenchError(f"the elastic run never reset after the kill:\n{first.tail()}")
                resumed_at, resume = after[0].seconds, reset_position(after[0], RANKS)
                ranks_after = tuple(reset.ranks for reset in after)
        finally:
            for launch in launches:
                launch.stop()
            kill_leftovers(marker)
        if code != 0:
            raise BenchError(f"the {mode} run with a worker loss exited {code}:\n{launches[-1].tail()}")
        trained = epoch_lines(launches[-1].lines, self.epochs)[1].seconds - began.seconds
        return Loss(mode, self.clean_seconds[mode], trained, resumed_at - killed, kill, resume, steps, ranks_after)


def write_data(workdir: Path, train_rows: int) -> Path:
    """Random CIFAR-10 python batches, converted to cifar_mixup's HDF5 files by the program's own converter."""
    source = write_cifar10_python(workdir / "cifar10-python", train_rows, TEST_ROWS, seed=5)
    out = workdir / "cifar10-h5"
    done = subprocess.run([sys.executable, "-m", "cifar_mixup.convert", "cifar10", "--source", str(source), "--out",
                           str(out)], cwd=REPO, env=job_environment(), capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"cifar_mixup.convert exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return out


def measure(workdir: Path, train_rows: int, epochs: int, kill_fraction: float, rounds: int) -> list[Row]:
    if not 0 < kill_fraction < 1 or epochs < KILL_EPOCH:
        raise ValueError(f"the kill falls inside epoch {KILL_EPOCH}: need 0 < kill_fraction < 1 and at least "
                         f"{KILL_EPOCH} epochs, got {kill_fraction} and {epochs}")
    data = write_data(workdir / "elastic", train_rows)
    losses: list[dict[str, Loss]] = []
    for index in range(rounds):
        order = MODES if index % 2 == 0 else MODES[::-1]
        directory = workdir / "elastic" / f"round{index}"
        directory.mkdir(parents=True, exist_ok=True)
        plan = Round(data, directory, epochs, kill_fraction)
        for mode in order:
            plan.clean(mode)
        losses.append({mode: plan.lossy(mode) for mode in order})
    return rows(losses, kill_fraction, epochs, train_rows)


def _ratio(static: float, elastic: float) -> float:
    """static / elastic; an elastic loss of nothing at all (or a gain, in noise) makes it infinite."""
    return static / elastic if elastic > 0 else float("inf")


def _describe(loss: Loss) -> str:
    return (f"clean {loss.clean_seconds:.1f} s, with the loss {loss.lossy_seconds:.1f} s; "
            f"{loss.paused_seconds:.1f} s from the kill to training again")


def rows(losses: Sequence[dict[str, Loss]], kill_fraction: float, epochs: int, train_rows: int) -> list[Row]:
    """The table's rows from every round's static and elastic losses: the ratios first, then each mode's medians."""
    static = [round_["static"] for round_ in losses]
    elastic = [round_["elastic"] for round_ in losses]
    seconds = _ratio(median([loss.lost_seconds for loss in static]), median([loss.lost_seconds for loss in elastic]))
    batches = _ratio(median([loss.redone for loss in static]), median([loss.redone for loss in elastic]))
    steps = static[0].steps_per_epoch
    setup = (f"cifar_mixup, {train_rows} random 32x32x3 images, batch 32 x {RANKS} ranks of 1 thread ({steps} steps "
             f"an epoch), {epochs} epochs; rank {KILLED_RANK} SIGKILLed {kill_fraction:g} into epoch {KILL_EPOCH}; "
             f"median over {len(losses)} round(s) of each mode's loss (the run with the loss less the same mode's "
             f"clean run), static / elastic; rounds, static/elastic s: "
             + ", ".join(f"{s.lost_seconds:.1f}/{e.lost_seconds:.1f}" for s, e in zip(static, elastic, strict=True)))
    target = "> 1: elastic loses less"
    found = [
        Row(SECTION, "seconds lost per worker loss, static restart / elastic", seconds, "x", target=target,
            meets=seconds > 1, detail=setup),
        Row(SECTION, "batches redone per worker loss, static restart / elastic", batches, "x", target=target,
            meets=batches > 1,
            detail=f"static goes back to rank 0's checkpoint (the epoch's start), elastic to its last commit "
                   f"(every {DEFAULT_COMMIT_EVERY_BATCHES} batches); rounds, static/elastic: "
                   + ", ".join(f"{s.redone}/{e.redone}" for s, e in zip(static, elastic, strict=True))),
    ]
    for mode, runs, how in (("static", static, "whole-job restart, started again at once"),
                            ("elastic", elastic, f"cooldown {COOLDOWN_SECONDS[0]}-{COOLDOWN_SECONDS[1]} s")):
        middle = sorted(runs, key=lambda loss: loss.lost_seconds)[(len(runs) - 1) // 2]
        grown = f"; ranks after the loss: {' -> '.join(map(str, middle.ranks_after))}" if middle.ranks_after else ""
        found.append(Row(SECTION, f"{mode} ({how}): seconds lost per worker loss",
                         median([loss.lost_seconds for loss in runs]), "s",
                         detail=f"median; the middle run: {_describe(middle)}{grown}",
                         extra={"rounds": [_record(loss) for loss in runs]}))
        found.append(Row(SECTION, f"{mode}: batches redone per worker loss", median([loss.redone for loss in runs]),
                         "batches",
                         detail=f"median; the middle run: killed at step {middle.kill.step} of {steps} of epoch "
                                f"{middle.kill.epoch} (Horovod's timeline), resumed at step {middle.resume.step} of "
                                f"epoch {middle.resume.epoch}"))
    return found


def _record(loss: Loss) -> dict[str, object]:
    return {"clean_seconds": loss.clean_seconds, "lossy_seconds": loss.lossy_seconds,
            "paused_seconds": loss.paused_seconds, "kill": [loss.kill.epoch, loss.kill.step],
            "resume": [loss.resume.epoch, loss.resume.step], "redone": loss.redone,
            "ranks_after": list(loss.ranks_after)}
