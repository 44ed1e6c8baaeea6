"""What every program's command line shares: common flags, directory defaults, logging, error exits, and the one
entry point (`run_program`: the program's `cli.parse`, then its `train.train`). `is_elastic` reads how horovodrun runs
the job, so flags can be checked against it before Horovod starts.

This module must not import TensorFlow: `quiet_tensorflow()` has to run before TensorFlow loads.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from trainlib import gpus, precision
from trainlib.errors import TrainingInputError

EXIT_BAD_INPUT = 2
# Elastic Horovod commits every this many batches. Measured with 2 Gloo ranks on a 2-core CPU machine: a commit costs
# 5-9 ms (mostly its host-update broadcast), a batch of the small test configurations 5-13 ms; 50 keeps commits under
# 2% of the time (see trainlib.elastic).
DEFAULT_COMMIT_EVERY_BATCHES = 50
# Rank 0 writes the learning rate to TensorBoard every this many optimizer steps: one read of the rate in the training
# thread, the write on the background writer's thread (the epoch metrics go there after every epoch).
DEFAULT_TENSORBOARD_EVERY_STEPS = 50


def quiet_tensorflow() -> None:
    """Hide TensorFlow's C++ info/warning chatter unless TF_CPP_MIN_LOG_LEVEL is already set. Call before importing
    TensorFlow."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def default_data_dir(environ: Mapping[str, str] | None = None) -> str:
    """$KUBETRAIN_DATA_DIR (the data volume the operator mounts), else /data."""
    env = os.environ if environ is None else environ
    return env.get("KUBETRAIN_DATA_DIR") or "/data"


def resolve_checkpoint_dir(flag: str | None, program: str, environ: Mapping[str, str] | None = None) -> str:
    """--checkpoint-dir if given, else $KUBETRAIN_CHECKPOINT_DIR (the job's own dir), else ./runs/<program>."""
    env = os.environ if environ is None else environ
    return flag or env.get("KUBETRAIN_CHECKPOINT_DIR") or os.path.join("runs", program)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a float > 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def add_common_arguments(parser: argparse.ArgumentParser, *, epochs: int, batch_size: int | str, learning_rate: float,
                         warmup_epochs: int = 0) -> None:
    """Flags every program takes; the defaults given here are the program's reference hyperparameters. A `batch_size`
    given as text is the help's description of a default the program picks itself (the flag then defaults to None)."""
    parser.add_argument("--data-dir", default=default_data_dir(),
                        help="directory holding the HDF5 files (default: $KUBETRAIN_DATA_DIR, else /data)")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="where rank 0 writes checkpoints, history.json, history.png and TensorBoard's event "
                             "files (tensorboard/) (default: $KUBETRAIN_CHECKPOINT_DIR, else ./runs/<program>)")
    parser.add_argument("--keep-checkpoints", type=positive_int, default=3,
                        help="how many of the newest checkpoints to keep (default: 3)")
    parser.add_argument("--epochs", type=positive_int, default=epochs, help=f"epochs to train (default: {epochs})")
    parser.add_argument("--batch-size", type=positive_int, default=batch_size if isinstance(batch_size, int) else None,
                        help=f"batch size per rank (default: {batch_size})")
    parser.add_argument("--learning-rate", type=positive_float, default=learning_rate,
                        help=f"learning rate for one rank; scaled by the number of ranks (default: {learning_rate})")
    parser.add_argument("--warmup-epochs", type=non_negative_int, default=warmup_epochs,
                        help="epochs over which the learning rate ramps from the one-rank value to the scaled one "
                             f"(default: {warmup_epochs})")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: none, every run differs)")
    parser.add_argument("--tensorboard-every-steps", type=non_negative_int, default=DEFAULT_TENSORBOARD_EVERY_STEPS,
                        help="rank 0 writes the learning rate to TensorBoard every N optimizer steps, besides every "
                             f"epoch's metrics (0: never; default: {DEFAULT_TENSORBOARD_EVERY_STEPS})")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="compute in float16 and keep the weights in float32 (Keras's mixed_float16 policy), "
                             "for GPUs; checkpoints are the same with or without it; not in elastic runs "
                             "(default: off)")


def add_elastic_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for elastic Horovod runs (`horovodrun --min-np ... --max-np ...`); ignored in other runs."""
    parser.add_argument("--commit-every-batches", type=positive_int, default=DEFAULT_COMMIT_EVERY_BATCHES,
                        help="elastic Horovod only: every N batches and at each epoch's end, keep a copy of the state "
                             "in memory and check for hosts that joined or left; when a rank fails, the others go "
                             f"back to the last copy (default: {DEFAULT_COMMIT_EVERY_BATCHES})")


def is_elastic(environ: Mapping[str, str] | None = None) -> bool:
    """Whether horovodrun runs this job elastically: it then sets HOROVOD_ELASTIC=1 in every rank's environment.
    Horovod reads the variable as an integer (unset: 0)."""
    env = os.environ if environ is None else environ
    value = env.get("HOROVOD_ELASTIC", "").strip()
    try:
        return int(value or "0") != 0
    except ValueError:
        raise ValueError(f"HOROVOD_ELASTIC must be an integer (horovodrun sets 1), got {value!r}") from None


def setup_logging(rank: int) -> None:
    """Rank 0 logs at INFO; other ranks only warnings and errors, so the job log reads like one process."""
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s rank{rank} %(levelname)s %(name)s: %(message)s", force=True)
    tf_logger = logging.getLogger("tensorflow")
    tf_logger.propagate = False  # TensorFlow prints its own records; do not print them twice
    tf_logger.setLevel(logging.WARNING)


def run_main(main: Callable[[Sequence[str] | None], int | None], program: str,
             argv: Sequence[str] | None = None) -> int:
    """Run `main(argv)`; input the user can fix becomes one `<program>: error: ...` line on stderr and exit code 2."""
    try:
        return main(argv) or 0
    except TrainingInputError as error:
        message = " ".join(str(error).split())
        print(f"{program}: error: {message}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


def run_program(program: str, parse: Callable[[Sequence[str] | None], argparse.Namespace],
                argv: Sequence[str] | None = None) -> int:
    """`python -m <program>`, the same in every program: `parse(argv)` (the program's `cli.parse`: the flags, the data
    files and whatever else can be checked without TensorFlow), then `<program>.train.train(args)`, where TensorFlow
    and Horovod first load. So `--help`, a bad flag or a bad file ends the run before either starts; bad input ends
    as in `run_main`: one line, exit code 2. In between, `gpus.check_gpus()` ends the same way a rank that holds GPUs
    TensorFlow cannot see, before Horovod starts or any data is read. Then `--mixed-precision` sets Keras's policy
    before the program builds its model (`precision.use_mixed_precision`); a rank without a GPU says, in one line,
    that it will be slow."""

    def main(argv: Sequence[str] | None) -> int:
        quiet_tensorflow()
        args = parse(argv)
        gpus.check_gpus()
        if args.mixed_precision:
            note = precision.use_mixed_precision(is_elastic())
            if note is not None:
                print(f"{program}: warning: {note}", file=sys.stderr, flush=True)
        return importlib.import_module(f"{program}.train").train(args)

    return run_main(main, program, argv)
