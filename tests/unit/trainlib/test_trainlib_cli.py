"""Shared command-line pieces: directory defaults and the one-line error exit."""

from __future__ import annotations

import argparse

import pytest

from trainlib.cli import EXIT_BAD_INPUT, add_common_arguments, default_data_dir, resolve_checkpoint_dir, run_main
from trainlib.errors import DataFileError


@pytest.mark.parametrize(("flag", "environ", "expected"), [
    ("/mine", {"KUBETRAIN_CHECKPOINT_DIR": "/checkpoints/ns/job"}, "/mine"),
    (None, {"KUBETRAIN_CHECKPOINT_DIR": "/checkpoints/ns/job"}, "/checkpoints/ns/job"),
    (None, {}, "runs/cifar_mixup"),
])
def test_checkpoint_dir_precedence(flag, environ, expected):
    assert resolve_checkpoint_dir(flag, "cifar_mixup", environ) == expected


def test_data_dir_comes_from_the_operator_or_defaults_to_data():
    assert default_data_dir({"KUBETRAIN_DATA_DIR": "/mnt/hdf5"}) == "/mnt/hdf5"
    assert default_data_dir({}) == "/data"


def test_common_flags_reject_nonsense_values(capsys):
    parser = argparse.ArgumentParser(prog="program")
    add_common_arguments(parser, epochs=30, batch_size=32, learning_rate=0.1)
    args = parser.parse_args([])
    assert (args.epochs, args.batch_size, args.learning_rate, args.keep_checkpoints) == (30, 32, 0.1, 3)
    assert args.tensorboard_every_steps == 50 and parser.parse_args(["--tensorboard-every-steps", "0"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch-size", "0"])
    assert "--batch-size: must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--tensorboard-every-steps", "-1"])
    assert "--tensorboard-every-steps: must be 0 or more, got -1" in capsys.readouterr().err


def test_input_errors_become_one_stderr_line_and_exit_2(capsys):
    def main(argv):
        raise DataFileError("/data/train.h5", "missing dataset\n(expected images)", "run the converter", "images")

    assert run_main(main, "program", []) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.err == ("program: error: /data/train.h5:images: missing dataset (expected images); "
                            "run the converter\n")


def test_other_errors_are_not_swallowed():
    def main(argv):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_main(main, "program", [])
