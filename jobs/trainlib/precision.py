"""Mixed precision (`--mixed-precision`): Keras's `mixed_float16` policy. Layers compute in float16 and keep their
variables in float32, so a checkpoint holds the same float32 arrays with or without the flag.

`refusal` and `cpu_note` are the decisions, pure functions; `use_mixed_precision` acts on them and sets the policy.
`trainlib.cli.run_program` calls it after the flags, before the program builds a model. Keras `compile` then wraps
the optimizer in a `LossScaleOptimizer`; programs with their own loop wrap theirs with `custom_loop.loss_scaled`.

The loss scale is not checkpointed: every start, fresh or resumed, begins at Keras's initial scale, the same on every
rank. The ranks then take the same steps: each averages the same scaled gradients and skips the same overflows.
An elastic run cannot keep that promise: a rank that joins would start from another scale than the others.
"""

from __future__ import annotations

from trainlib import gpus
from trainlib.errors import TrainingInputError

POLICY = "mixed_float16"


def refusal(elastic: bool) -> str | None:
    """Why this run cannot train with --mixed-precision; None when it can."""
    if elastic:
        return ("--mixed-precision is not available in elastic runs (horovodrun --min-np/--max-np): a rank that "
                "joins would start from another loss scale than the others; give the job a fixed number of workers, "
                "or drop --mixed-precision")
    return None


def cpu_note(gpus_seen: int) -> str | None:
    """The line a rank that sees no GPU prints; None when it sees one."""
    if gpus_seen > 0:
        return None
    return "this rank has no GPU: --mixed-precision trains, but float16 on a CPU is many times slower than float32"


def use_mixed_precision(elastic: bool) -> str | None:
    """Refuse the flag (`TrainingInputError`), or set the global policy to mixed_float16 and return the note for a
    rank without a GPU (None with one). Call before any model is built."""
    problem = refusal(elastic)
    if problem is not None:
        raise TrainingInputError(problem)
    import tensorflow as tf

    tf.keras.mixed_precision.set_global_policy(POLICY)
    seen, _ = gpus.tensorflow_gpus()
    return cpu_note(seen)
