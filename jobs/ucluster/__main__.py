"""`python -m ucluster`: `ucluster.cli` parses the flags and checks the data files, then `ucluster.train` trains."""

from trainlib.cli import run_program
from ucluster.cli import PROGRAM, parse

if __name__ == "__main__":
    raise SystemExit(run_program(PROGRAM, parse))
