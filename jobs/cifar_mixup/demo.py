"""`python -m cifar_mixup.demo --out runs/demo`: cifar_mixup on real images, 2 Horovod ranks, no cluster.

Converts scikit-learn's 8x8 digits to HDF5, trains the notebook's CNN with MixUp for a few epochs under
`horovodrun -np 2` (Gloo), and leaves the checkpoints, history.json, history.png and evaluation.json in a fresh
folder under `--out`, whose name it prints. Takes a few minutes on 2 CPU cores.

The digits give only ~45 steps per epoch, so the demo raises Adadelta's learning rate (3.0 per rank) and lowers the
batch to 16; the CIFAR-10 defaults (0.1, 32) are for 1500+ steps per epoch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

from cifar_mixup.convert import convert_digits

# What the digits need to learn in a few epochs: ~45 steps per epoch at batch 16, and Adadelta's larger step.
DIGITS_FLAGS = ("--batch-size", "16", "--learning-rate", "3.0")


def horovodrun() -> str:
    """horovodrun next to this Python (the virtualenv's), else the one on PATH."""
    sibling = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    found = sibling if os.path.exists(sibling) else shutil.which("horovodrun")
    if not found:
        raise SystemExit("cifar_mixup.demo: error: horovodrun not found; install Horovod (make setup)")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cifar_mixup.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("runs", "demo"), help="parent folder (default: runs/demo)")
    parser.add_argument("--epochs", type=int, default=10, help="epochs to train (default: 10)")
    parser.add_argument("--np", type=int, default=2, help="Horovod ranks (default: 2)")
    args = parser.parse_args(argv)
    folder = os.path.abspath(os.path.join(args.out, time.strftime("run-%Y%m%d-%H%M%S")))
    data_dir, checkpoint_dir = os.path.join(folder, "data"), os.path.join(folder, "checkpoints")
    train_rows, test_rows = convert_digits(data_dir)
    print(f"demo: {train_rows} training and {test_rows} held-out digits written to {data_dir}", flush=True)
    command = [horovodrun(), "-np", str(args.np), "--gloo", sys.executable, "-m", "cifar_mixup",
               "--data-dir", data_dir, "--checkpoint-dir", checkpoint_dir, "--epochs", str(args.epochs),
               *DIGITS_FLAGS, "--mixup", "--alpha", "0.2"]
    print("demo: " + " ".join(command), flush=True)
    environment = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    returncode = subprocess.run(command, env=environment, check=False).returncode
    if returncode != 0:
        print(f"demo: training failed with exit code {returncode}; see the log above", file=sys.stderr)
        return returncode
    print(f"demo: done. Checkpoints and the training curve are in {checkpoint_dir}:")
    for name in sorted(os.listdir(checkpoint_dir)):
        print(f"  {os.path.join(checkpoint_dir, name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
