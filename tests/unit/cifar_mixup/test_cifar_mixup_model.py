"""The notebook's CNN, kept layer for layer, on CIFAR-sized and digit-sized images."""

from __future__ import annotations

import pytest

from cifar_mixup.model import build_cnn


@pytest.mark.parametrize("input_shape", [(32, 32, 3), (8, 8, 1)])
def test_architecture_matches_the_notebook(input_shape):
    model = build_cnn(input_shape, num_classes=10)
    layers = [(type(layer).__name__, getattr(layer, "filters", None) or getattr(layer, "units", None))
              for layer in model.layers]
    assert layers == [("Conv2D", 24), ("BatchNormalization", None), ("Conv2D", 36), ("BatchNormalization", None),
                      ("Conv2D", 48), ("BatchNormalization", None), ("Conv2D", 60), ("BatchNormalization", None),
                      ("Flatten", None), ("Dropout", None), ("Dense", 10), ("Dropout", None), ("Dense", 10),
                      ("Dropout", None), ("BatchNormalization", None), ("Dense", 10)]
    assert all(layer.padding == "same" for layer in model.layers if hasattr(layer, "padding"))
    assert [layer.rate for layer in model.layers if hasattr(layer, "rate")] == [0.4, 0.4, 0.4]
    assert model.layers[-1].activation.__name__ == "softmax"
    assert model.output_shape == (None, 10)
    height, width, _ = input_shape
    assert model.layers[8].output_shape == (None, height * width * 60), "same padding keeps the image size"
