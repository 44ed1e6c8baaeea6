"""The library every kubetrain training program shares.

Modules, one job each:

- `hdf5_files`   validate HDF5 files (no TensorFlow needed) and read each rank's contiguous block of rows in chunks
- `hdf5_input`   stream that block into a `tf.data.Dataset` (map, shuffle, batch, repeat, prefetch with AUTOTUNE)
- `mixup`        MixUp inside the tf.data graph (`sample_beta_distribution`, `mix_up`, `apply_mixup`)
- `distributed`  Horovod setup in the canonical order: init, pin GPU, lr x size, DistributedOptimizer, callbacks
- `checkpoints`  rank-0 atomic checkpoints on disk (`CheckpointManager`), keep the last K, find the latest good one
- `resume`       restore the latest checkpoint on rank 0 and broadcast epoch and state to every rank
- `status_payload` / `kube_status` / `progress`   progress reports to the DistributedTraining's status
- `history`      `history.json` and the `history.png` training curve next to the checkpoints
- `callbacks`    Keras callbacks adapting checkpoints, history and progress to `model.fit`
- `keras_training` `fit_distributed`: resume + broadcast + `model.fit` with all callbacks, for Keras programs
- `cli`          shared argparse flags, logging setup, and `run_main` (bad input -> one stderr line, exit 2)
- `errors`       `TrainingInputError` and its subclasses

Importing `trainlib` itself is cheap; TensorFlow and Horovod load only with the modules that need them.
"""
