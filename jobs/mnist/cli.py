"""`python -m mnist`: the article's tf.data pipeline and CNN, distributed with Horovod, MirroredStrategy or
MultiWorkerMirroredStrategy.

Reference hyperparameters (article "Exploring distributed training with Keras and TensorFlow data module"): Adam,
batch 256 per replica, 10 epochs; the learning rate (0.001, Keras' Adam default) is multiplied by the number of
replicas (with Horovod, reached after a 1-epoch warm-up).

    horovodrun -np 2 python -m mnist --data-dir /data/mnist                    # Horovod (default)
    python -m mnist --strategy mirrored --data-dir /data/mnist                 # every GPU of this machine
    TF_CONFIG='{"cluster": {"worker": ["h0:2222", "h1:2222"]}, "task": {"type": "worker", "index": 0}}' \\
        python -m mnist --strategy multiworker --data-dir /data/mnist          # one process per worker

With `--strategy multiworker` worker 0 is the chief: it alone writes checkpoints and history; every worker resumes from
the latest complete checkpoint in the (shared) checkpoint directory. See mnist.strategies for the global batch.

With Horovod under `horovodrun --min-np/--max-np`, training is elastic: it goes on when ranks fail or join (see
trainlib.elastic).

This module parses the flags and checks the data files and TF_CONFIG; TensorFlow loads later, in mnist.train.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence

from mnist.data import validate_data
from trainlib.cli import add_common_arguments, add_elastic_arguments, positive_int, resolve_checkpoint_dir
from trainlib.errors import TrainingInputError

PROGRAM = "mnist"
TF_CONFIG_EXAMPLE = '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, epochs=10, batch_size=256, learning_rate=0.001, warmup_epochs=1)
    add_elastic_arguments(parser)
    parser.add_argument("--strategy", choices=["horovod", "mirrored", "multiworker"], default="horovod",
                        help="horovod (run under horovodrun/mpirun), mirrored (tf.distribute.MirroredStrategy over "
                             "this machine's GPUs, the article's) or multiworker (tf.distribute."
                             "MultiWorkerMirroredStrategy, cluster from TF_CONFIG) (default: horovod)")
    parser.add_argument("--replicas", type=positive_int, default=None,
                        help="for --strategy mirrored: how many GPUs (default: all); on a machine without GPUs, that "
                             "many logical CPU devices (default: 1)")
    parser.add_argument("--shuffle-buffer", type=positive_int, default=4096,
                        help="rows in the shuffle buffer (default: 4096; the article used 256, here chunks of rows "
                             "are also read in random order)")
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, checked: bad input raises `TrainingInputError` before TensorFlow loads. Adds the data files'
    descriptions (`train_info`, `test_info`) and resolves `checkpoint_dir`."""
    args = build_parser().parse_args(argv)
    if args.replicas is not None and args.strategy != "mirrored":
        raise TrainingInputError(f"--replicas is for --strategy mirrored, not {args.strategy}; add --strategy mirrored "
                                 "or drop --replicas")
    args.train_info, args.test_info = validate_data(args.data_dir)
    if args.strategy == "multiworker":
        parse_tf_config()
    args.checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, PROGRAM)
    return args


def parse_tf_config(environ: Mapping[str, str] | None = None) -> tuple[bool, int, int]:
    """Check TF_CONFIG early; returns (is_chief, worker rank, number of workers). Chief first, then workers."""
    env = os.environ if environ is None else environ
    raw = env.get("TF_CONFIG")
    if not raw:
        raise TrainingInputError("--strategy multiworker needs TF_CONFIG describing the cluster, e.g. "
                                 f"{TF_CONFIG_EXAMPLE}")
    try:
        config = json.loads(raw)
        cluster, task = config["cluster"], config["task"]
        task_type, index = task["type"], int(task["index"])
        members = [("chief", i) for i in range(len(cluster.get("chief", [])))]
        members += [("worker", i) for i in range(len(cluster.get("worker", [])))]
    except (ValueError, KeyError, TypeError) as error:
        raise TrainingInputError(f"TF_CONFIG is not valid ({type(error).__name__}: {error}); expected e.g. "
                                 f"{TF_CONFIG_EXAMPLE}") from None
    if (task_type, index) not in members:
        raise TrainingInputError(f"TF_CONFIG task {task_type}:{index} is not in its cluster {dict(cluster)}; "
                                 "fix task.type/task.index")
    rank = members.index((task_type, index))
    return rank == 0, rank, len(members)
