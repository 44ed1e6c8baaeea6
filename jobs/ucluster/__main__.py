"""`python -m ucluster`: see ucluster.train."""

from trainlib.cli import quiet_tensorflow, run_main

quiet_tensorflow()

from ucluster.train import main  # noqa: E402  (TensorFlow must load after quiet_tensorflow)

raise SystemExit(run_main(main, "ucluster"))
