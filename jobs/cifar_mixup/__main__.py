"""`python -m cifar_mixup`: `cifar_mixup.cli` parses the flags and checks the data files, then `cifar_mixup.train`
trains."""

from cifar_mixup.cli import PROGRAM, parse
from trainlib.cli import run_program

if __name__ == "__main__":
    raise SystemExit(run_program(PROGRAM, parse))
