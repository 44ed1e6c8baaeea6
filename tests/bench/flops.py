"""FLOPs of a training step, counted analytically from layer shapes (pure).

Counted: the multiply-adds of convolutions and dense layers, 2 FLOPs each. A training step runs each layer's forward
pass, the weight gradient (as many multiply-adds again) and the input gradient (again, except for the first weighted
layer, whose input is data). Element-wise work (bias, ReLU, batch norm, dropout, softmax) is left out: for the
cifar_mixup CNN it is well under 1% of the total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Layers without multiply-adds worth counting; a weighted layer not listed here and not handled is an error, so a new
# layer type never silently counts as zero.
ELEMENTWISE_LAYERS = frozenset({
    "InputLayer", "BatchNormalization", "Dropout", "Flatten", "Activation", "ReLU", "Softmax", "Reshape",
    "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "LayerNormalization",
})


@dataclass(frozen=True)
class LayerMacs:
    """Multiply-adds of one layer's forward pass for one example."""

    name: str
    macs: int


def conv2d_macs(output_height: int, output_width: int, kernel_height: int, kernel_width: int, input_channels: int,
                filters: int, groups: int = 1) -> int:
    """Every output element is a dot product over kernel_height x kernel_width x input_channels / groups inputs."""
    return output_height * output_width * filters * kernel_height * kernel_width * (input_channels // groups)


def dense_macs(inputs: int, units: int, positions: int = 1) -> int:
    """A dense layer applied at `positions` positions (1 for a flat input)."""
    return positions * inputs * units


def forward_flops(layers: Sequence[LayerMacs]) -> int:
    return 2 * sum(layer.macs for layer in layers)


def training_flops(layers: Sequence[LayerMacs]) -> int:
    """Forward + weight gradients + input gradients of every weighted layer but the first, per example."""
    if not layers:
        return 0
    forward = forward_flops(layers)
    return 3 * forward - 2 * layers[0].macs


def _shape(value: Any, layer: Any) -> tuple[int, ...]:
    """A layer's shape without the batch dimension; every other dimension must be known to count FLOPs."""
    dims = tuple(value)[1:]
    if any(d is None for d in dims):
        raise ValueError(f"layer {layer.name} has an unknown dimension in {tuple(value)}; build the model with a "
                         "fixed input shape")
    return tuple(int(d) for d in dims)


def keras_layer_macs(layers: Iterable[Any]) -> list[LayerMacs]:
    """Per-example multiply-adds of the Conv2D and Dense layers of a built Keras model (`model.layers`)."""
    found = []
    for layer in layers:
        kind = type(layer).__name__
        if kind == "Conv2D":
            height, width, channels = _shape(layer.output_shape, layer)
            input_channels = _shape(layer.input_shape, layer)[-1]
            kernel_height, kernel_width = layer.kernel_size
            found.append(LayerMacs(layer.name, conv2d_macs(height, width, kernel_height, kernel_width,
                                                           input_channels, channels, getattr(layer, "groups", 1))))
        elif kind == "Dense":
            input_shape = _shape(layer.input_shape, layer)
            positions = 1
            for dimension in input_shape[:-1]:
                positions *= dimension
            found.append(LayerMacs(layer.name, dense_macs(input_shape[-1], layer.units, positions)))
        elif kind not in ELEMENTWISE_LAYERS and layer.weights:
            raise ValueError(f"layer {layer.name} ({kind}) has weights but no FLOP rule; add one to {__name__}")
    return found
