"""`--mixed-precision`: every program takes the flag (off by default); an elastic run refuses it with one line and exit
code 2 before TensorFlow loads; a rank without a GPU says it will be slow; a custom loop's optimizer scales the loss
exactly when Keras `compile` would."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import tensorflow as tf

from cifar_mixup.cli import build_parser as cifar_mixup_parser
from higgs.cli import build_parser as higgs_parser
from mnist.cli import build_parser as mnist_parser
from trainlib import cli, precision
from trainlib.cli import EXIT_BAD_INPUT, run_program
from trainlib.custom_loop import loss_scaled
from ucluster.cli import build_parser as ucluster_parser

ELASTIC_REFUSAL = ("--mixed-precision is not available in elastic runs (horovodrun --min-np/--max-np): a rank that "
                   "joins would start from another loss scale than the others; give the job a fixed number of "
                   "workers, or drop --mixed-precision")


@pytest.mark.parametrize("parser", [cifar_mixup_parser, mnist_parser, ucluster_parser, higgs_parser])
def test_every_program_takes_the_flag_and_leaves_it_off_by_default(parser) -> None:
    assert parser().parse_args([]).mixed_precision is False
    assert parser().parse_args(["--mixed-precision"]).mixed_precision is True


def test_the_decisions() -> None:
    assert precision.refusal(elastic=False) is None
    assert precision.refusal(elastic=True) == ELASTIC_REFUSAL
    assert precision.cpu_note(1) is None
    assert precision.cpu_note(0) == ("this rank has no GPU: --mixed-precision trains, but float16 on a CPU is many "
                                     "times slower than float32")


def test_an_elastic_run_refuses_the_flag_with_one_line_before_it_sets_anything(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    imported: list[str] = []
    monkeypatch.setattr(cli, "importlib", SimpleNamespace(import_module=imported.append))
    monkeypatch.setattr(tf.keras.mixed_precision, "set_global_policy", imported.append)
    monkeypatch.setenv("HOROVOD_ELASTIC", "1")

    assert run_program("cifar_mixup", lambda argv: argparse.Namespace(mixed_precision=True), []) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == f"cifar_mixup: error: {ELASTIC_REFUSAL}\n"
    assert imported == [], "no policy set, no training module imported"


@pytest.fixture
def mixed_policy() -> Iterator[None]:
    """Keras's global policy is mixed_float16 for the test, float32 again afterwards."""
    tf.keras.mixed_precision.set_global_policy(precision.POLICY)
    try:
        yield
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")


def test_a_custom_loop_scales_the_loss_under_the_mixed_policy(mixed_policy: None) -> None:
    optimizer = tf.keras.optimizers.legacy.Adam(0.01)
    wrapped = loss_scaled(optimizer)
    assert isinstance(wrapped, tf.keras.mixed_precision.LossScaleOptimizer)
    assert wrapped.inner_optimizer is optimizer


def test_a_custom_loop_keeps_its_optimizer_under_the_default_policy() -> None:
    optimizer = tf.keras.optimizers.legacy.Adam(0.01)
    assert loss_scaled(optimizer) is optimizer
