"""The reference's staircase schedules for the learning rate and the batch-norm momentum ("bn decay").

Both count samples seen, `step * samples_per_step`, and drop by `decay_rate` every `decay_step` samples. The reference
fed them a counter that never advanced (its optimizer incremented a different variable), so it trained at the initial
values throughout; here the optimizer's own step drives them, counting the samples of every rank.
"""

from __future__ import annotations

import tensorflow as tf

from trainlib.custom_loop import warmup_fraction

LEARNING_RATE_CLIP = 1e-5  # the learning rate never decays below this
BN_INIT_DECAY = 0.5  # batch-norm momentum starts at 1 - 0.5
BN_DECAY_DECAY_RATE = 0.5
BN_DECAY_CLIP = 0.99  # batch-norm momentum never exceeds this


def _decay_count(step: tf.Tensor, samples_per_step: int, decay_step: int) -> tf.Tensor:
    samples = tf.cast(step, tf.float64) * float(samples_per_step)
    return tf.floor(samples / float(decay_step))


def staircase_learning_rate(
    step: tf.Tensor, base_rate: float, samples_per_step: int, decay_step: int, decay_rate: float
) -> tf.Tensor:
    """base_rate * decay_rate ** floor(samples / decay_step), clipped below at LEARNING_RATE_CLIP (float32)."""
    decays = _decay_count(step, samples_per_step, decay_step)
    rate = float(base_rate) * tf.pow(tf.constant(decay_rate, tf.float64), decays)
    return tf.cast(tf.maximum(rate, tf.constant(LEARNING_RATE_CLIP, tf.float64)), tf.float32)


def batch_norm_momentum(step: tf.Tensor, samples_per_step: int, decay_step: int) -> tf.Tensor:
    """min(BN_DECAY_CLIP, 1 - BN_INIT_DECAY * BN_DECAY_DECAY_RATE ** floor(samples / decay_step)) (float32)."""
    decays = _decay_count(step, samples_per_step, decay_step)
    remaining = BN_INIT_DECAY * tf.pow(tf.constant(BN_DECAY_DECAY_RATE, tf.float64), decays)
    return tf.cast(tf.minimum(tf.constant(BN_DECAY_CLIP, tf.float64), 1.0 - remaining), tf.float32)


def warmup_factor(step: tf.Tensor, size: int, warmup_steps: int) -> tf.Tensor:
    """Horovod's warm-up as a factor: from 1/size at step 0 linearly to 1 at `warmup_steps`, then 1 (float32)."""
    if warmup_steps <= 0 or size <= 1:
        return tf.constant(1.0)
    return warmup_fraction(tf.minimum(tf.cast(step, tf.float32) / float(warmup_steps), 1.0), size)


@tf.keras.utils.register_keras_serializable(package="ucluster")
class StaircaseLearningRate(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Keras schedule form of `staircase_learning_rate` times `warmup_factor` (the optimizer passes its step).

    Registered because Horovod's DistributedOptimizer rebuilds the optimizer from its config.
    """

    def __init__(self, base_rate: float, samples_per_step: int, decay_step: int, decay_rate: float, size: int = 1,
                 warmup_steps: int = 0) -> None:
        self.base_rate = base_rate
        self.samples_per_step = samples_per_step
        self.decay_step = decay_step
        self.decay_rate = decay_rate
        self.size = size
        self.warmup_steps = warmup_steps

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        rate = staircase_learning_rate(step, self.base_rate, self.samples_per_step, self.decay_step, self.decay_rate)
        return rate * warmup_factor(step, self.size, self.warmup_steps)

    def get_config(self) -> dict:
        return {
            "base_rate": self.base_rate,
            "samples_per_step": self.samples_per_step,
            "decay_step": self.decay_step,
            "decay_rate": self.decay_rate,
            "size": self.size,
            "warmup_steps": self.warmup_steps,
        }


def alpha_for_epoch(epoch: int, epochs_pretrain: int) -> float:
    """Sharpness of the soft k-means assignment: 2 * (epoch - epochs_pretrain + 1), i.e. 2 in the first clustering
    epoch and 2 more every epoch after (0-based epochs; the reference's formula, whose epoch counter never advanced)."""
    return float(2 * (epoch - epochs_pretrain + 1))
