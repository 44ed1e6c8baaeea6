"""Images/s of the cifar_mixup CNN trained from in-memory tensors, plain Keras or under Horovod (one rank each).

    python -m tests.bench.workers.throughput --threads 2 --out result/            # plain Keras
    horovodrun -np 2 python -m tests.bench.workers.throughput --horovod --threads 1 --out result/

Each rank writes `<out>/rank<r>.json`: wall-clock and CPU step-end times of the timed steps, and with --horovod
the time of one allreduce of every gradient (the tensors DistributedOptimizer averages each step), timed on its own;
without, the model's FLOPs per example.
"""

from __future__ import annotations

import argparse
import os
import time

from tests.bench.workers.common import (
    compiled_cnn,
    in_memory_dataset,
    limit_threads,
    random_examples,
    step_timer,
    write_result,
)

ROWS_PER_RANK = 1024


def time_allreduce(model, repeats: int) -> tuple[list[float], float, int]:  # noqa: ANN001 - a Keras model
    """Seconds of one averaging allreduce of tensors shaped like every trainable variable, `repeats` times; the
    process's CPU seconds per allreduce (every thread: Horovod's background thread, Gloo's); the bytes reduced."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    tensors = [tf.random.normal(variable.shape) for variable in model.trainable_variables]

    @tf.function
    def reduce_all(values: list[tf.Tensor]) -> list[tf.Tensor]:
        return [hvd.allreduce(value, op=hvd.Average) for value in values]

    for _ in range(3):
        reduce_all(tensors)
    seconds = []
    cpu = time.process_time()
    for _ in range(repeats):
        start = time.perf_counter()
        reduce_all(tensors)
        seconds.append(time.perf_counter() - start)
    return seconds, (time.process_time() - cpu) / repeats, sum(int(tf.size(t)) * 4 for t in tensors)


def count_flops(model) -> dict[str, float]:  # noqa: ANN001 - a Keras model
    """Per-example FLOPs: analytic (tests.bench.flops) for training and forward, and tf.profiler's forward count of
    the frozen inference graph as a cross-check of the analytic one."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from tests.bench.flops import forward_flops, keras_layer_macs, training_flops

    layers = keras_layer_macs(model.layers)
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, *model.input_shape[1:]], tf.float32))
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    profile = tf.compat.v1.profiler.profile(graph=convert_variables_to_constants_v2(concrete).graph, options=options)
    return {"training_flops_per_example": training_flops(layers), "forward_flops_per_example": forward_flops(layers),
            "profiler_forward_flops_per_example": profile.total_float_ops}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horovod", action="store_true", help="init Horovod and use its DistributedOptimizer")
    parser.add_argument("--threads", type=int, required=True, help="TensorFlow intra- and inter-op threads")
    parser.add_argument("--batch-size", type=int, default=32, help="per-rank batch (cifar_mixup's default: 32)")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--windows", type=int, default=3, help="timed steps are split into this many windows")
    parser.add_argument("--allreduce-repeats", type=int, default=20)
    parser.add_argument("--out", required=True, help="directory for rank<r>.json")
    args = parser.parse_args()

    limit_threads(args.threads)
    import tensorflow as tf

    rank, size, callbacks = 0, 1, []
    if args.horovod:
        from trainlib.distributed import horovod_callbacks, init_horovod

        context = init_horovod()
        rank, size = context.rank, context.size
        total_steps = args.warmup_steps + args.steps
        callbacks = horovod_callbacks(0.1 * size, warmup_epochs=0, steps_per_epoch=total_steps)
    tf.keras.utils.set_random_seed(rank)
    model = compiled_cnn(size, horovod=args.horovod)
    if args.horovod:
        from trainlib.resume import keras_state, restore_and_broadcast

        restore_and_broadcast(context, None, keras_state(model))  # every rank starts from rank 0's weights
    images, labels = random_examples(ROWS_PER_RANK, seed=rank)
    timer = step_timer()
    model.fit(in_memory_dataset(images, labels, args.batch_size), steps_per_epoch=args.warmup_steps + args.steps,
              epochs=1, callbacks=[*callbacks, timer], verbose=0)
    result = {"rank": rank, "size": size, "threads": args.threads, "batch_size": args.batch_size,
              "windows": args.windows, "times": timer.times[args.warmup_steps - 1:],
              "cpu_times": timer.cpu_times[args.warmup_steps - 1:],
              "fusion_threshold": os.environ.get("HOROVOD_FUSION_THRESHOLD"),
              "cycle_time_ms": os.environ.get("HOROVOD_CYCLE_TIME")}
    if args.horovod:
        seconds, cpu_seconds, gradient_bytes = time_allreduce(model, args.allreduce_repeats)
        result.update(allreduce_seconds=seconds, allreduce_cpu_seconds=cpu_seconds, gradient_bytes=gradient_bytes)
    else:
        result.update(count_flops(model))
    write_result(os.path.join(args.out, f"rank{rank}.json"), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
