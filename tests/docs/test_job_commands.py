"""`--help` works for every `python -m` module the documentation names. (Every job file's `spec.command` runs up to its
data in tests/unit/programs/test_program_entry.py, beside the probe it uses.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.documented import REPO, python_modules


@pytest.mark.parametrize("module", python_modules())
def test_every_python_m_module_the_documentation_names_prints_its_help(module: str) -> None:
    # From the repository root, where the documentation runs them (`python -m tests.bench` needs it).
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"python -m {module} --help exited {done.returncode}: {done.stderr}"
    assert done.stdout.startswith(f"usage: python -m {module} "), done.stdout[:400]


def test_the_documentation_names_every_program_and_its_tools() -> None:
    # guards the extraction: docs/programs.md and the jobs' READMEs name these (more may come)
    assert {"cifar_mixup", "cifar_mixup.convert", "higgs", "higgs.compare", "higgs.convert", "mnist",
            "mnist.convert", "ucluster", "ucluster.synthetic"} <= set(python_modules())
