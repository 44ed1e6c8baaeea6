"""`python -m higgs` flags. Defaults are the notebook's (Distributed Keras on the ATLAS Higgs challenge).

Reference values: 1 epoch, batch 64, Adagrad ('adagrad', whose Keras default rate was 0.01), categorical
cross-entropy, dense 600-600 with dropout 0.2; EASGD with rho 5.0 and learning rate 0.04 (moving rate 0.2); the
communication window 30 of the notebook's asynchronous EASGD run. The allreduce trainer scales the rate by the ranks.
"""

from __future__ import annotations

import argparse

from trainlib.cli import add_common_arguments, positive_float, positive_int

TRAINERS = ("single", "allreduce", "easgd", "model-averaging")
EPOCHS = 1
BATCH_SIZE = 64
LEARNING_RATE = 0.01
RHO = 5.0
EASGD_LEARNING_RATE = 0.04
COMMUNICATION_WINDOW = 30


def trainer_list(text: str) -> tuple[str, ...]:
    """argparse type: comma-separated trainer names."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in TRAINERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected trainers from {', '.join(TRAINERS)}, got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m higgs",
        description="Signal/background classification on the ATLAS Higgs challenge data with one of four "
        "distributed trainers, scored by F1 on the test split; --compare runs several and charts them.",
    )
    add_common_arguments(parser, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)
    parser.add_argument("--train-file", default="train.h5", help="training HDF5 in --data-dir (default: train.h5)")
    parser.add_argument("--test-file", default="test.h5", help="test HDF5 in --data-dir (default: test.h5)")
    parser.add_argument("--trainer", choices=TRAINERS, default="allreduce",
                        help="single: rank 0 alone; allreduce: Horovod DistributedOptimizer; easgd: elastic "
                             "averaging with a centre variable; model-averaging: local steps then mean weights "
                             "(default: allreduce)")
    parser.add_argument("--compare", action="store_true",
                        help="run every trainer of --trainers in turn, print a table and save compare.png")
    parser.add_argument("--trainers", type=trainer_list, default=TRAINERS,
                        help=f"trainers for --compare (default: {','.join(TRAINERS)})")
    parser.add_argument("--communication-window", type=positive_int, default=COMMUNICATION_WINDOW,
                        help=f"local steps between synchronisations for easgd and model-averaging "
                             f"(default: {COMMUNICATION_WINDOW})")
    parser.add_argument("--rho", type=positive_float, default=RHO, help=f"EASGD elasticity rho (default: {RHO})")
    parser.add_argument("--easgd-learning-rate", type=positive_float, default=EASGD_LEARNING_RATE,
                        help="EASGD learning rate; moving rate alpha = this x rho "
                             f"(default: {EASGD_LEARNING_RATE})")
    parser.add_argument("--hidden-units", type=positive_int, default=600, help="width of both layers (default: 600)")
    parser.add_argument("--dropout", type=float, default=0.2, help="dropout after the first layer (default: 0.2)")
    return parser
