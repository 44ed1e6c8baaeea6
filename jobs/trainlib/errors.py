"""Errors a training program turns into one clear stderr line and exit code 2 (see `trainlib.cli.run_main`)."""


class TrainingInputError(Exception):
    """Bad input the user can fix: a missing, truncated or mis-shaped data file, a bad flag value, etc.

    The message is a single line that names the file (and dataset), says what was expected and what was found, and how
    to fix it.
    """


class DataFileError(TrainingInputError):
    """An HDF5 data file is missing, unreadable, or lacks a dataset with the expected shape and dtype."""

    def __init__(self, path: str, problem: str, fix: str, dataset: str | None = None) -> None:
        where = f"{path}:{dataset}" if dataset else path
        super().__init__(f"{where}: {problem}; {fix}")
        self.path = path
        self.dataset = dataset


class CheckpointError(TrainingInputError):
    """A checkpoint cannot be restored into the current model (e.g. it was written for another architecture)."""


class MissingGpuError(TrainingInputError):
    """This rank holds GPUs that TensorFlow cannot see: a CPU image, or GPUs that never reached the container."""
