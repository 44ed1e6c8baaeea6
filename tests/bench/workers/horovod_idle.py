"""CPU a Horovod rank burns while it waits: its background thread negotiates with the other ranks once per
HOROVOD_CYCLE_TIME even when no tensor is ready.

    HOROVOD_CYCLE_TIME=1 horovodrun -np 2 --gloo python -m tests.bench.workers.horovod_idle --seconds 8 --out dir/

Each rank initialises Horovod, runs one allreduce (so the background thread is up), sleeps `--seconds` and writes
`<out>/rank<r>.json` with its CPU seconds per wall-clock second over the sleep.
"""

from __future__ import annotations

import argparse
import os
import time

from tests.bench.workers.common import limit_threads, write_result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    limit_threads(1)
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    hvd.allreduce(tf.constant([1.0]))
    wall, cpu = time.perf_counter(), time.process_time()
    time.sleep(args.seconds)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    write_result(os.path.join(args.out, f"rank{hvd.rank()}.json"),
                 {"rank": hvd.rank(), "cpu_per_second": cpu / wall,
                  "cycle_time_ms": os.environ.get("HOROVOD_CYCLE_TIME")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
