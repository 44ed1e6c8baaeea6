"""How the worker-loss benchmark reads the programs' output: the kill point, where training resumed, the batches
redone and the seconds lost, and the rows it makes of them. Also: both modes run the same program with the same
flags, and the random CIFAR-10 batches go through cifar_mixup's own converter."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from cifar_mixup.convert import convert_cifar10

from .datasets import write_cifar10_python
from .elastic_recovery import (
    Line,
    Loss,
    Position,
    StepCounter,
    batches_redone,
    elastic_command,
    elastic_resumes,
    epoch_lines,
    reset_position,
    restored_position,
    rows,
    static_command,
    steps_per_epoch,
)
from .processes import BenchError

END = " - 11s - loss: 2.5 - accuracy: 0.1 - val_loss: 2.4 - val_accuracy: 0.1 - lr: 0.1667 - 11s/epoch - 110ms/step"
ELASTIC_RUN = [
    Line(5.0, "[0]<stderr>:2026-11-24 04:56:13,174 rank0 INFO trainlib.elastic: 2 ranks train from epoch 1, step 0 of "
              "100"),
    Line(5.1, "[0]<stdout>:Epoch 1/3"),
    Line(17.0, f"[0]<stdout>:100/100{END}"),
    Line(17.1, "[0]<stdout>:Epoch 2/3"),
    Line(17.2, "[0]<stderr>:2026-11-24 04:56:25,416 rank0 INFO trainlib.callbacks: saved checkpoint ckpt-000001.h5"),
    Line(25.4, "Process 1 exit with status code 137."),
    Line(26.0, "[0]<stderr>:2026-11-24 04:56:34,144 rank0 INFO trainlib.elastic: 1 ranks train from epoch 2, step 100 "
               "of 200"),
    Line(26.1, "[0]<stdout>:Epoch 2/3"),
    Line(33.0, f"[0]<stdout>:100/100{END}"),
    Line(33.1, "[0]<stdout>:Epoch 3/3"),
    Line(40.0, "[0]<stderr>:2026-11-24 04:56:48,000 rank0 INFO trainlib.elastic: 2 ranks train from epoch 3, step 90 "
               "of 100"),
    Line(48.0, "[0]<stdout>:Epoch 3/3"),
    Line(49.0, f"[0]<stdout>:10/10{END}"),
]
RESTARTED = [
    Line(40.0, "[0]<stderr>:2026-11-24 04:41:19,151 rank0 INFO cifar_mixup: 2 ranks; per rank 3200 training rows (100 "
               "steps) and 160 held-out rows; mixup on (alpha 0.2)"),
    Line(40.5, "[0]<stderr>:2026-11-24 04:41:19,631 rank0 INFO trainlib.resume: training starts at epoch 2 with "
               "weights digest cccbf36548a52420 on all 2 ranks"),
]


def test_an_epoch_runs_from_its_begin_line_to_its_end_line_and_a_reset_epoch_counts_its_last_fit() -> None:
    began, ended = epoch_lines(ELASTIC_RUN, 1)
    assert (began.seconds, ended.seconds) == (5.1, 17.0)
    began, ended = epoch_lines(ELASTIC_RUN, 2)
    assert (began.seconds, ended.seconds) == (26.1, 33.0), "the rest of epoch 2 after the reset"
    assert epoch_lines(ELASTIC_RUN, 3)[1].seconds == 49.0
    with pytest.raises(BenchError, match="epoch 4"):
        epoch_lines(ELASTIC_RUN, 4)


def test_an_epoch_s_steps_at_two_ranks_come_from_rank0_s_log() -> None:
    assert steps_per_epoch(RESTARTED) == 100
    with pytest.raises(BenchError):
        steps_per_epoch(ELASTIC_RUN)


TIMELINE = (
    '[\n{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros":1}},\n'
    '{"ph": "B", "name": "NEGOTIATE_BROADCAST", "ts": 615013, "pid": 1},{"ph": "E", "ts": 832734, "pid": 1},'
    '{"name": "process_name", "ph": "M", "pid": 86, "args": {"name": "PartitionedCall/DistributedAdadelta_Allreduce/'
    'cond_22/HorovodAllreduce_grads_22_0"}},\n'
    '{"name": "process_name", "ph": "M", "pid": 109, "args": {"name": "PartitionedCall/DistributedAdadelta_Allreduce/'
    'cond/HorovodAllreduce_grads_0"}},\n'
    + "".join('{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 10, "pid": 109},{"ph": "E", "ts": 11, "pid": 109},'
              '{"ph": "B", "name": "ALLREDUCE", "ts": 12, "pid": 109},{"ph": "E", "ts": 13, "pid": 109},'
              '{"ph": "B", "name": "ALLREDUCE", "ts": 12, "pid": 86},{"ph": "E", "ts": 13, "pid": 86},'
              for _ in range(3))
)


def test_steps_are_the_first_gradient_s_allreduces_in_horovod_s_timeline_however_the_file_is_cut() -> None:
    whole = StepCounter(Path("unused"))
    whole.feed(TIMELINE)
    assert whole.steps == 3
    for size in (7, 50, 333):
        pieces = StepCounter(Path("unused"))
        for start in range(0, len(TIMELINE), size):
            pieces.feed(TIMELINE[start:start + size])
        assert pieces.steps == 3, f"cut every {size} characters"


def test_the_step_counter_reads_what_was_added_to_the_timeline_since_it_last_looked(tmp_path: Path) -> None:
    path = tmp_path / "timeline.json"
    counter = StepCounter(path)
    assert counter.poll() == 0, "no file yet: no step"
    half = TIMELINE.index('{"ph": "B", "name": "ALLREDUCE", "ts": 12, "pid": 109}') + 20
    path.write_text(TIMELINE[:half])
    assert counter.poll() == 0, "the first allreduce's event is cut off"
    path.write_text(TIMELINE)
    assert counter.poll() == 3


def test_a_restart_resumes_at_the_start_of_the_epoch_after_rank0_s_checkpoint() -> None:
    assert restored_position(RESTARTED) == (40.5, Position(2, 0))
    with pytest.raises(BenchError):
        restored_position(RESTARTED[:1])


def test_an_elastic_reset_resumes_at_the_last_commit_counted_in_steps_of_two_ranks() -> None:
    resumes = elastic_resumes(ELASTIC_RUN)
    assert [(resume.ranks, resume.epoch, resume.step) for resume in resumes] == [(2, 1, 0), (1, 2, 100), (2, 3, 90)]
    # one rank took 100 steps of its 200 since the commit was made at 2 ranks: that commit was at step 50 of 100
    assert reset_position(resumes[1], ranks_before=2) == Position(2, 50)
    assert reset_position(resumes[2], ranks_before=1) == Position(3, 180)


def test_batches_redone_run_from_the_resume_point_to_the_kill_point_across_epochs() -> None:
    assert batches_redone(Position(2, 75), Position(2, 0), 100) == 75
    assert batches_redone(Position(2, 75), Position(2, 50), 100) == 25
    assert batches_redone(Position(3, 10), Position(2, 50), 100) == 60


def loss(mode: str, clean: float, lossy: float, resume_step: int) -> Loss:
    return Loss(mode, clean, lossy, 1.0, Position(2, 75), Position(2, resume_step), 100,
                (1, 2) if mode == "elastic" else ())


def test_rows_lead_with_the_ratio_of_the_modes_medians_and_judge_elastic_losing_less() -> None:
    losses = [{"static": loss("static", 20.0, 35.0, 0), "elastic": loss("elastic", 21.0, 26.0, 50)},
              {"static": loss("static", 20.0, 40.0, 0), "elastic": loss("elastic", 20.0, 24.0, 50)},
              {"static": loss("static", 20.0, 38.0, 0), "elastic": loss("elastic", 20.0, 30.0, 50)}]
    seconds, batches, static_seconds, static_batches, elastic_seconds, elastic_batches = rows(losses, 0.75, 3, 6400)
    assert seconds.value == pytest.approx(18.0 / 5.0) and seconds.meets is True  # the medians' ratio
    assert "15.0/5.0, 20.0/4.0, 18.0/10.0" in seconds.detail
    assert batches.value == pytest.approx(3.0) and batches.meets is True
    assert static_seconds.value == pytest.approx(18.0) and static_seconds.unit == "s"
    assert elastic_seconds.value == pytest.approx(5.0)
    assert "ranks after the loss: 1 -> 2" in elastic_seconds.detail
    assert (static_batches.value, elastic_batches.value) == (75, 25)
    assert "resumed at step 50 of epoch 2" in elastic_batches.detail
    assert len(elastic_seconds.extra["rounds"]) == 3


def test_an_elastic_run_that_lost_nothing_measurable_makes_the_ratio_infinite_not_an_error() -> None:
    losses = [{"static": loss("static", 20.0, 35.0, 0), "elastic": loss("elastic", 21.0, 20.5, 50)}]
    seconds = rows(losses, 0.75, 2, 6400)[0]
    assert math.isinf(seconds.value) and seconds.meets is True


def test_both_modes_run_the_same_program_with_the_same_flags_on_the_same_two_hosts(tmp_path: Path) -> None:
    static = static_command(tmp_path / "data", tmp_path / "checkpoints", 3)
    elastic = elastic_command(tmp_path / "discover.sh", tmp_path / "data", tmp_path / "checkpoints", 3)
    program = static[static.index(sys.executable):]
    assert elastic[elastic.index(sys.executable):] == program
    assert program[1:3] == ["-m", "cifar_mixup"] and "--epochs" in program
    assert static[static.index("-H") + 1] == "127.0.0.1:1,localhost:1" and "--gloo" in static
    assert {"--min-np", "--max-np", "--host-discovery-script", "--gloo"} <= set(elastic)


def test_random_cifar10_batches_go_through_the_program_s_own_converter(tmp_path: Path) -> None:
    source = write_cifar10_python(tmp_path / "python", train_rows=23, test_rows=4)
    assert convert_cifar10(str(source), str(tmp_path / "h5")) == (23, 4)
    with h5py.File(tmp_path / "h5" / "train.h5", "r") as handle:
        assert handle["images"].shape == (23, 32, 32, 3) and handle["images"].dtype == np.uint8
        assert set(np.unique(handle["labels"][:])) <= set(range(10))
    with pytest.raises(ValueError):
        write_cifar10_python(tmp_path / "none", train_rows=4, test_rows=1)
