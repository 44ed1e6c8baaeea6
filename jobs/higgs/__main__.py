"""`python -m higgs`: see higgs.train."""

from trainlib.cli import quiet_tensorflow, run_main

quiet_tensorflow()

from higgs.train import main  # noqa: E402  (TensorFlow must load after quiet_tensorflow)

raise SystemExit(run_main(main, "higgs"))
