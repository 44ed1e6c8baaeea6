"""Peak RSS of one rank taking one full pass over its share of an HDF5 file.

    python -m tests.bench.workers.rss_pipeline --data train.h5 --rank 0 --size 2 --feed hdf5 --out r0.json

`--feed hdf5` streams the rank's block through trainlib's pipeline exactly as cifar_mixup builds it (preprocess,
shuffle, batch, MixUp). `--feed load` is the naive alternative kept as a control: read the whole block into memory
(uint8, as the file stores it) and slice it with the same preprocessing; its peak RSS must grow with the data, which
shows the measurement can see growth. Each batch is consumed by a cheap reduction, so the pass takes seconds and the
peak is the input's.
"""

from __future__ import annotations

import argparse

from tests.bench.workers.common import NUM_CLASSES, limit_threads, peak_rss_bytes, write_result

MIXUP_ALPHA = 0.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--feed", choices=("hdf5", "load"), required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    limit_threads(args.threads)
    import h5py
    import tensorflow as tf

    from cifar_mixup.data import FIX, IMAGES, LABELS, SPECS
    from cifar_mixup.train import make_preprocess
    from trainlib.hdf5_files import rank_block, validate_files
    from trainlib.hdf5_input import make_dataset
    from trainlib.mixup import apply_mixup

    info = validate_files([args.data], SPECS, FIX)[0]
    if args.feed == "hdf5":
        feed = make_dataset([info], [IMAGES, LABELS], rank=args.rank, size=args.size, batch_size=args.batch_size,
                            training=True, preprocess=make_preprocess(NUM_CLASSES),
                            batch_transform=apply_mixup(MIXUP_ALPHA), seed=0)
        dataset, steps, rows = feed.dataset, feed.steps, feed.rows
    else:
        start, stop = rank_block(info.rows, args.rank, args.size)
        with h5py.File(args.data, "r") as handle:
            images, labels = handle[IMAGES][start:stop], handle[LABELS][start:stop]
        rows = stop - start
        steps = rows // args.batch_size
        dataset = (tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(rows)
                   .map(make_preprocess(NUM_CLASSES), num_parallel_calls=tf.data.AUTOTUNE)
                   .batch(args.batch_size, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE))
    baseline = peak_rss_bytes()

    @tf.function
    def consume(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(images) + tf.reduce_sum(labels)

    checksum = 0.0
    for images, labels in dataset.take(steps):
        checksum += float(consume(images, labels))
    write_result(args.out, {"peak_rss_bytes": peak_rss_bytes(), "rss_before_pass_bytes": baseline, "rows": rows,
                            "steps": steps, "feed": args.feed, "checksum": checksum})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
