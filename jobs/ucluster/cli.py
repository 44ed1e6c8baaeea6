"""`python -m ucluster` flags. Defaults are the reference notebook's hyperparameters (UCluster on W/Z/top jets).

Reference values: 10 epochs, 1 of them pretraining, batch 1024 per rank, Adam at 0.001 x ranks halved every 500000
samples (clipped at 1e-5), batch-norm momentum 0.5 -> 0.99 on the same staircase, 20 pretext classes, 3 clusters in a
3-dimensional embedding, 100 particles x 8 features. The network's widths are flags so tests can run a tiny one.

`parse` checks the flags and the data files before TensorFlow loads (in ucluster.train).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from trainlib.cli import add_common_arguments, non_negative_int, positive_int, resolve_checkpoint_dir
from trainlib.errors import TrainingInputError
from ucluster.data import validate_split

PROGRAM = "ucluster"
EPOCHS = 10
EPOCHS_PRETRAIN = 1
BATCH_SIZE = 1024
LEARNING_RATE = 0.001
DECAY_STEP = 500_000
DECAY_RATE = 0.5
FOCAL_GAMMA = 4.0  # upstream UCluster's get_focal_loss default, which the notebook uses


def int_tuple(length: int):
    """argparse type: `length` comma-separated positive integers, e.g. "64,128,256,256"."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(part) for part in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {length} comma-separated integers, got {text!r}") from None
        if len(values) != length or min(values) < 1:
            raise argparse.ArgumentTypeError(f"expected {length} comma-separated positive integers, got {text!r}")
        return values

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROGRAM}",
        description="UCluster: a GAPNet-style network on jet point clouds, pretrained on a classification task, then "
        "trained jointly with a k-means loss; reports cluster accuracy by Hungarian matching.",
    )
    add_common_arguments(parser, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)
    data = parser.add_argument_group("data (UCluster HDF5 layout: data, pid, label)")
    data.add_argument("--train-list", default="train_files.txt",
                      help="file in --data-dir listing the training HDF5 files (default: train_files.txt)")
    data.add_argument("--test-list", default="test_files.txt",
                      help="file in --data-dir listing the test HDF5 files (default: test_files.txt)")
    data.add_argument("--num-point", type=positive_int, default=100, help="particles per jet (default: 100)")
    data.add_argument("--nfeat", type=positive_int, default=8, help="features per particle (default: 8)")
    data.add_argument("--ncat", type=positive_int, default=20, help="classes of the pretext task, `pid` (default: 20)")
    data.add_argument("--n-clusters", type=positive_int, default=3,
                      help="clusters; `label` is one-hot over them (default: 3)")

    training = parser.add_argument_group("training schedule")
    training.add_argument("--epochs-pretrain", type=non_negative_int, default=EPOCHS_PRETRAIN,
                          help="epochs of classification only before k-means initialises the centroids "
                               f"(default: {EPOCHS_PRETRAIN})")
    training.add_argument("--optimizer", choices=("adam", "momentum"), default="adam", help="(default: adam)")
    training.add_argument("--momentum", type=float, default=0.9, help="for --optimizer momentum (default: 0.9)")
    training.add_argument("--decay-step", type=positive_int, default=DECAY_STEP,
                          help=f"samples (over all ranks) between learning-rate halvings (default: {DECAY_STEP})")
    training.add_argument("--decay-rate", type=float, default=DECAY_RATE,
                          help=f"learning-rate factor per decay step (default: {DECAY_RATE})")
    training.add_argument("--wd", type=float, default=0.0, help="L2 weight decay on kernels (default: 0.0)")
    training.add_argument("--kmeans-samples", type=positive_int, default=100_000,
                          help="embeddings (over all ranks) k-means is fitted on (default: 100000)")

    model = parser.add_argument_group("network (GAPNet-style)")
    model.add_argument("--max-dim", type=positive_int, default=3, help="embedding dimension (default: 3)")
    model.add_argument("--neighbors", type=positive_int, default=10, help="k of the k-NN graphs (default: 10)")
    model.add_argument("--attention-heads", type=positive_int, default=1, help="heads per attention block (default: 1)")
    model.add_argument("--edge-widths", type=int_tuple(2), default=(16, 128),
                       help="widths of the two attention blocks (default: 16,128)")
    model.add_argument("--conv-widths", type=int_tuple(4), default=(64, 128, 256, 256),
                       help="widths of the four point-wise convolutions (default: 64,128,256,256)")
    model.add_argument("--dense-widths", type=int_tuple(2), default=(256, 128),
                       help="widths of the two dense layers of the classifier (default: 256,128)")
    model.add_argument("--pooling", choices=("mean", "max"), default="mean",
                       help="how the embedding pools over particles: mean, as upstream UCluster's gapnet_classify "
                            "(the notebook's model), or max, as its first release (default: mean)")
    model.add_argument("--head-dropout", type=rate_pair, default=(0.0, 0.0),
                       help="dropout rates after the two dense layers of the classifier; the reference has none, its "
                            "first release used 0.1,0.4 (default: 0,0)")
    training.add_argument("--focal-gamma", type=float, default=FOCAL_GAMMA,
                          help="focusing exponent of the focal loss; upstream UCluster's is 4, a TF2 fork's 2 "
                               f"(default: {FOCAL_GAMMA:g})")
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, checked: bad input raises `TrainingInputError` before TensorFlow loads. Adds the checked data files
    (`train_files`, `test_files`) and resolves `checkpoint_dir`."""
    args = build_parser().parse_args(argv)
    if args.neighbors > args.num_point:
        raise TrainingInputError(f"--neighbors {args.neighbors} exceeds --num-point {args.num_point}")
    shape = dict(num_points=args.num_point, num_features=args.nfeat, num_classes=args.ncat,
                 num_clusters=args.n_clusters)
    args.train_files = validate_split(args.data_dir, args.train_list, **shape)
    args.test_files = validate_split(args.data_dir, args.test_list, **shape)
    args.checkpoint_dir = resolve_checkpoint_dir(args.checkpoint_dir, PROGRAM)
    return args


def rate_pair(text: str) -> tuple[float, float]:
    """argparse type: two comma-separated dropout rates in [0, 1), e.g. "0.1,0.4"."""
    try:
        first, second = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two comma-separated rates, got {text!r}") from None
    if not (0 <= first < 1 and 0 <= second < 1):
        raise argparse.ArgumentTypeError(f"rates must be in [0, 1), got {text!r}")
    return first, second
