"""What a rank imports before its first step: each program's training module brings TensorFlow and Horovod, not
scikit-learn or matplotlib (about a CPU second each at every rank's start; they are imported where they are used:
after training, or on rank 0 only)."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAMS = ("cifar_mixup.train", "ucluster.train", "mnist.train", "higgs.train")
LATE = ("sklearn", "matplotlib")


def test_no_program_imports_scikit_learn_or_matplotlib_before_its_first_step() -> None:
    probe = (f"import json, sys\nfor name in {PROGRAMS!r}:\n    __import__(name)\n"
             f"print(json.dumps(sorted(m for m in {LATE!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], "imported before the first step"
