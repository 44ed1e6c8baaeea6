"""`python -m cifar_mixup`: see `cifar_mixup.train`."""

from trainlib.cli import quiet_tensorflow, run_main

quiet_tensorflow()

from cifar_mixup.train import main  # noqa: E402 - TensorFlow's log level must be set before it loads

if __name__ == "__main__":
    raise SystemExit(run_main(main, "cifar_mixup"))
