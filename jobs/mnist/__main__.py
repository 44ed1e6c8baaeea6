"""`python -m mnist`: `mnist.cli` parses the flags and checks the data files, then `mnist.train` trains."""

from mnist.cli import PROGRAM, parse
from trainlib.cli import run_program

if __name__ == "__main__":
    raise SystemExit(run_program(PROGRAM, parse))
