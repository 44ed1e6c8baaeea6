"""FLOP counting of a training step, checked by hand on small layers and on the cifar_mixup CNN itself."""

from __future__ import annotations

import pytest

from .flops import LayerMacs, conv2d_macs, dense_macs, forward_flops, keras_layer_macs, training_flops


def test_conv_and_dense_multiply_adds() -> None:
    # 3x3 kernel over 4 input channels into 8 filters, 5x5 output: 25 positions x 8 filters x 36 products
    assert conv2d_macs(5, 5, 3, 3, 4, 8) == 25 * 8 * 36
    assert conv2d_macs(5, 5, 3, 3, 4, 8, groups=2) == 25 * 8 * 18
    assert dense_macs(100, 10) == 1000
    assert dense_macs(16, 4, positions=3) == 192


def test_training_step_is_three_passes_except_the_first_input_gradient() -> None:
    layers = [LayerMacs("first", 100), LayerMacs("second", 10)]
    assert forward_flops(layers) == 220
    # forward 220 + weight gradients 220 + input gradient of the second layer only (20)
    assert training_flops(layers) == 460
    assert training_flops([]) == 0


def test_cifar_mixup_cnn_counts_match_hand_count_and_tf_profiler() -> None:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from cifar_mixup.model import build_cnn

    model = build_cnn((32, 32, 3), 10)
    layers = keras_layer_macs(model.layers)
    # per pixel: 9 x (3x24 + 24x36 + 36x48 + 48x60) = 49,896 multiply-adds over 32x32 pixels (same padding);
    # dense: 32*32*60 -> 10, 10 -> 10, 10 -> 10
    hand_macs = 49_896 * 1024 + 61_440 * 10 + 100 + 100
    assert [layer.macs for layer in layers] == [663_552, 7_962_624, 15_925_248, 26_542_080, 614_400, 100, 100]
    assert forward_flops(layers) == 2 * hand_macs
    assert training_flops(layers) == 3 * 2 * hand_macs - 2 * 663_552

    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, 32, 32, 3], tf.float32))
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    profile = tf.compat.v1.profiler.profile(graph=convert_variables_to_constants_v2(concrete).graph,
                                            options=builder(builder.float_operation()).with_empty_output().build())
    # the profiler also counts bias adds and batch-norm arithmetic, which the analytic count leaves out
    assert forward_flops(layers) <= profile.total_float_ops <= 1.01 * forward_flops(layers)


def test_a_weighted_layer_without_a_rule_is_an_error() -> None:
    class Attention:
        name = "attention"
        weights = ["w"]

    with pytest.raises(ValueError, match="attention .* no FLOP rule"):
        keras_layer_macs([Attention()])
