"""The library every kubetrain training program shares.

Modules, one job each:

- `hdf5_files`     validate HDF5 files (no TensorFlow needed) and read each rank's contiguous block of rows in chunks
- `hdf5_input`     stream that block into a `tf.data.Dataset` (map, shuffle, batch, repeat, prefetch with AUTOTUNE)
- `hdf5_writer`    `HDF5Writer` for the converters: append rows in batches, publish the file atomically
- `mixup`          MixUp inside the tf.data graph (`sample_beta_distribution`, `mix_up`, `apply_mixup`)
- `distributed`    Horovod setup in the canonical order: init, pin GPU, lr x size, DistributedOptimizer, callbacks;
                   `start_rank` (init + logging + seed per rank) and the collectives the programs use
- `checkpoints`    rank-0 atomic checkpoints on disk (`CheckpointManager`), keep the last K, find the latest good one
- `resume`         restore the checkpoint to resume from on rank 0 and broadcast epoch and state to every rank
- `resume_policy`  which checkpoint to resume from (spec.checkpoint.resume), from who wrote it: a pure decision
- `metrics`        `finite_metrics`: epoch metrics as plain finite floats, the form every record and report takes
- `status_payload` pure builder of the status patch (`status.progress`, `status.checkpoint`)
- `kube_status`    the one module that talks to the Kubernetes API: merge-patch the status subresource
- `progress`       `ProgressReporter`: rank 0's reports, on with KUBETRAIN_REPORT_STATUS=1, never fatal
- `startup`        rank 0's startup report: when Horovod's world was up and its first step done
- `history`        `history.json` and the `history.png` training curve next to the checkpoints
- `plots`          the training-curve plots (matplotlib, Agg backend)
- `callbacks`      Keras callbacks adapting checkpoints, history and progress to `model.fit`
- `keras_training` `fit_distributed`: resume + broadcast + `model.fit` with all callbacks, for Keras programs
- `elastic`        `fit_elastic`: the same under elastic Horovod (ranks fail or join while training goes on)
- `custom_loop`    for programs with their own loop: `EpochRecorder` (checkpoint, history and progress per epoch),
                   Horovod's warm-up as pure functions (`warmup_learning_rate`, `warmup_fraction`), and `loss_scaled`
                   (the LossScaleOptimizer Keras `compile` gives `fit` under --mixed-precision)
- `gpus`           the `-gpu` image naming rule, and `check_gpus`: a rank that holds GPUs TensorFlow cannot see stops
- `precision`      `--mixed-precision`: Keras's mixed_float16 policy, refused in elastic runs, slow on a CPU
- `cli`            shared argparse flags, logging setup, and `run_main` (bad input -> one stderr line, exit 2)
- `errors`         `TrainingInputError` and its subclasses

Importing `trainlib` itself is cheap; TensorFlow and Horovod load only with the modules that need them.
"""
