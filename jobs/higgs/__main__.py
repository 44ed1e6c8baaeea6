"""`python -m higgs`: `higgs.cli` parses the flags and checks both files, then `higgs.train` trains."""

from higgs.cli import parse
from trainlib.cli import run_program

if __name__ == "__main__":
    raise SystemExit(run_program("higgs", parse))
