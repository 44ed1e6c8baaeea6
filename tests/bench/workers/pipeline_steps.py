"""Training steps/s of the cifar_mixup CNN fed by trainlib's HDF5 pipeline vs by tensors already in memory.

    python -m tests.bench.workers.pipeline_steps --data train.h5 --threads 2 --repeats 3 --out result.json

One process, one compiled model, the two feeds alternated `--repeats` times so both see the same machine noise. The
HDF5 feed is the program's own: `make_dataset` with cifar_mixup's preprocessing and MixUp (alpha 0.2), shuffled, as
`cifar_mixup.train.train` builds it. The in-memory feed holds the same rows preprocessed as float32 tensors. Steps are
counted per wall-clock second and per CPU second of the process (the pipeline's threads included).
"""

from __future__ import annotations

import argparse

from tests.bench.workers.common import (
    NUM_CLASSES,
    compiled_cnn,
    in_memory_dataset,
    limit_threads,
    step_timer,
    write_result,
)

MIXUP_ALPHA = 0.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="HDF5 file with images (N, 32, 32, 3) uint8 and labels (N,)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per feed and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True, help="JSON result file")
    args = parser.parse_args()

    limit_threads(args.threads)
    import h5py
    import numpy as np
    import tensorflow as tf

    from cifar_mixup.data import FIX, IMAGES, LABELS, SPECS, scale_images
    from cifar_mixup.train import make_preprocess
    from trainlib.hdf5_files import validate_files
    from trainlib.hdf5_input import make_dataset
    from trainlib.mixup import apply_mixup

    tf.keras.utils.set_random_seed(0)
    info = validate_files([args.data], SPECS, FIX)[0]
    hdf5_feed = make_dataset([info], [IMAGES, LABELS], rank=0, size=1, batch_size=args.batch_size, training=True,
                             preprocess=make_preprocess(NUM_CLASSES), batch_transform=apply_mixup(MIXUP_ALPHA), seed=0)
    with h5py.File(args.data, "r") as handle:
        images = scale_images(handle[IMAGES][:])
        labels = np.eye(NUM_CLASSES, dtype=np.float32)[handle[LABELS][:]]
    feeds = {"memory": in_memory_dataset(images, labels, args.batch_size), "hdf5": hdf5_feed.dataset}
    model = compiled_cnn()
    steps_per_second: dict[str, list[float]] = {name: [] for name in feeds}
    steps_per_cpu_second: dict[str, list[float]] = {name: [] for name in feeds}
    for _ in range(args.repeats):
        for name, dataset in feeds.items():
            timer = step_timer()
            model.fit(dataset, steps_per_epoch=args.warmup_steps + args.steps, epochs=1, callbacks=[timer], verbose=0)
            times, cpu_times = timer.times[args.warmup_steps - 1:], timer.cpu_times[args.warmup_steps - 1:]
            steps_per_second[name].append((len(times) - 1) / (times[-1] - times[0]))
            steps_per_cpu_second[name].append((len(cpu_times) - 1) / (cpu_times[-1] - cpu_times[0]))
    write_result(args.out, {"steps_per_second": steps_per_second, "steps_per_cpu_second": steps_per_cpu_second,
                            "batch_size": args.batch_size, "threads": args.threads, "rows": info.rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
