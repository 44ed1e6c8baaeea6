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
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mnist.data import validate_data
from trainlib.cli import add_common_arguments, positive_int, resolve_checkpoint_dir
from trainlib.errors import TrainingInputError

PROGRAM = "mnist"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, epochs=10, batch_size=256, learning_rate=0.001, warmup_epochs=1)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Validate the data (and TF_CONFIG), then train; bad input raises `TrainingInputError` before TensorFlow loads."""
    args = build_parser().parse_args(argv)
    if args.replicas is not None and args.strategy != "mirrored":
        raise TrainingInputError(f"--replicas is for --strategy mirrored, not {args.strategy}; add --strategy mirrored "
                                 "or drop --replicas")
    train_info, test_info = validate_data(args.data_dir)
    checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, PROGRAM)
    if args.strategy != "horovod":
        from mnist.strategies import parse_tf_config, train_with_strategy

        if args.strategy == "multiworker":
            parse_tf_config()
        return train_with_strategy(args, train_info, test_info, checkpoint_dir)
    from mnist.run import train_horovod

    return train_horovod(args, train_info, test_info, checkpoint_dir)
