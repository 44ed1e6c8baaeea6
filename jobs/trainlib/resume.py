"""Resume: rank 0 finds the checkpoint to resume from (spec.checkpoint.resume: trainlib.resume_policy), every rank
learns its epoch and gets rank 0's state; the job's status says what was resumed and which job wrote it.

Works on any set of variables grouped by name (`{"model": [...], "optimizer": [...]}`), so custom training loops use it
as well as Keras (`keras_state`). With Horovod every rank must call `restore_and_broadcast` (it runs collectives); with
tf.distribute every worker calls `restore_latest` (no broadcast: all read the same shared directory). A legacy Keras
optimizer makes its slots only in its first step; `create_optimizer_slots` makes them before, so they can be restored.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import tensorflow as tf

from trainlib import distributed, resume_policy, startup
from trainlib.checkpoints import CheckpointManager, state_digest
from trainlib.distributed import WorkerContext
from trainlib.errors import CheckpointError
from trainlib.progress import ProgressReporter
from trainlib.resume_policy import Written

log = logging.getLogger(__name__)
RESUME_ENV = "KUBETRAIN_CHECKPOINT_RESUME"  # spec.checkpoint.resume

Variables = Mapping[str, Sequence[tf.Variable]]


def keras_state(model: tf.keras.Model) -> dict[str, list[tf.Variable]]:
    """The variables a Keras checkpoint holds: all model weights, and the optimizer's iteration counter and slots.

    The optimizer's slot variables are created here (before the first step) so they can be restored and broadcast.
    Hyperparameters such as the learning rate are not saved: they come from the flags and the warm-up schedule. Nor
    is a `LossScaleOptimizer`'s loss scale (--mixed-precision): its `variables()` are the wrapped optimizer's, so a
    checkpoint is the same with or without the flag.
    """
    optimizer = model.optimizer
    variables: dict[str, list[tf.Variable]] = {"model": list(model.weights)}
    if optimizer is not None:
        create_optimizer_slots(optimizer, model.trainable_variables)
        variables["optimizer"] = list(optimizer.variables())
    return variables


def create_optimizer_slots(optimizer: tf.keras.optimizers.legacy.Optimizer, variables: Sequence[tf.Variable]) -> None:
    """Have a fresh legacy Keras optimizer create its iteration counter and its slots for `variables` (Adam's moments,
    SGD's momentum, Adagrad's accumulators) now, before its first step, so a checkpoint can be restored into them and
    Horovod can broadcast them. Weights and slots keep their initial values and `iterations` stays 0.

    Legacy optimizers create their slots in their first `apply_gradients`; this applies zero gradients once, through
    the base `Optimizer.apply_gradients` (a Horovod `DistributedOptimizer`'s override, which may average gradients
    over ranks, is not called) without tf.distribute's aggregation, so no collective runs; then it sets `iterations`
    back to 0. A zero gradient changes nothing in SGD (with or without momentum), Adam, Adagrad, Adadelta or RMSprop
    (it would in Ftrl, whose step recomputes the weights). Under a tf.distribute strategy's scope the step runs in its
    replicas, so the slots are the strategy's variables. A `LossScaleOptimizer` (--mixed-precision) has the slots made
    in the optimizer it wraps, whose variables are also the ones its `variables()` lists.
    """
    if isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer):
        optimizer = optimizer.inner_optimizer
    if not isinstance(optimizer, tf.keras.optimizers.legacy.Optimizer):
        raise TypeError(f"create_optimizer_slots needs a tf.keras.optimizers.legacy optimizer, got {type(optimizer)}")
    if int(optimizer.iterations.numpy()) != 0:
        raise ValueError(f"create_optimizer_slots is for a fresh optimizer; this one has taken "
                         f"{int(optimizer.iterations.numpy())} steps, and zero gradients would move its slots")
    variables = list(variables)

    def apply_zero_gradients() -> None:
        zeros = [tf.zeros_like(variable) for variable in variables]
        tf.keras.optimizers.legacy.Optimizer.apply_gradients(optimizer, list(zip(zeros, variables, strict=True)),
                                                             experimental_aggregate_gradients=False)

    if tf.distribute.in_cross_replica_context():  # inside strategy.scope(): steps run in the replicas
        tf.distribute.get_strategy().run(apply_zero_gradients)
    else:
        apply_zero_gradients()
    optimizer.iterations.assign(0)


def assign_state(variables: Variables, state: Mapping[str, Sequence], source: str) -> None:
    """Assign saved arrays to variables group by group; a count or shape mismatch raises `CheckpointError`."""
    for group, targets in variables.items():
        arrays = state.get(group)
        if arrays is None:
            raise CheckpointError(f"{source}: has no '{group}' state; start from a fresh --checkpoint-dir")
        if len(arrays) != len(targets):
            raise CheckpointError(f"{source}: '{group}' has {len(arrays)} arrays but the model has {len(targets)} "
                                  "variables (written for another model or data shape?); use a fresh --checkpoint-dir")
        for variable, array in zip(targets, arrays, strict=True):
            if tuple(variable.shape) != tuple(array.shape):
                raise CheckpointError(f"{source}: '{group}' variable {variable.name} has shape {tuple(array.shape)} "
                                      f"in the checkpoint but {tuple(variable.shape)} in the model; use a fresh "
                                      "--checkpoint-dir or the original data")
            variable.assign(array)


def restore_and_broadcast(context: WorkerContext, manager: CheckpointManager | None, variables: Variables) -> int:
    """Restore the latest checkpoint on rank 0, broadcast epoch and variables; returns the epochs already done.

    With no checkpoint (or no manager) every rank still receives rank 0's initial variables, so all ranks start equal.
    Afterwards the ranks compare fingerprints of the model weights and rank 0 logs the common one.
    """
    epoch, problem = 0, None
    if context.is_chief and manager is not None:
        try:
            epoch = _restore_here(manager, variables, report=True)
        except CheckpointError as error:
            problem = str(error)
    epoch, problem = distributed.broadcast_object((epoch, problem), root_rank=0)
    if problem:
        raise CheckpointError(problem)
    distributed.broadcast_variables([variable for group in variables.values() for variable in group], root_rank=0)
    digest = state_digest(variable.numpy() for variable in variables.get("model", []))
    digests = distributed.allgather_object(digest)
    if len(set(digests)) != 1:
        raise RuntimeError(f"ranks hold different weights after the broadcast: {digests}")
    if context.is_chief:
        log.info("training starts at epoch %d with weights digest %s on all %d ranks", epoch + 1, digest, context.size)
    return epoch


def restore_latest(manager: CheckpointManager, variables: Variables, context: WorkerContext) -> int:
    """Restore the latest checkpoint on this worker (tf.distribute: every worker reads the same shared directory and
    the strategy keeps the replicas equal); returns the epochs already done. The chief logs what it restored."""
    epoch = _restore_here(manager, variables, report=context.is_chief)
    if epoch and context.is_chief:
        log.info("training starts at epoch %d with weights digest %s", epoch + 1,
                 state_digest(variable.numpy() for variable in variables.get("model", [])))
    return epoch


def _restore_here(manager: CheckpointManager, variables: Variables, report: bool,
                  environ: Mapping[str, str] | None = None) -> int:
    """Assign the checkpoint spec.checkpoint.resume (KUBETRAIN_CHECKPOINT_RESUME) picks in `manager` to `variables`
    in this process; returns its epoch (0: a fresh start). `report` (the chief): log what was restored or why not, set
    aside the checkpoints a fresh start does not use, and tell the job's status."""
    env = os.environ if environ is None else environ
    latest = manager.latest()
    written = None if latest is None else Written(latest.path, latest.epoch, latest.saved_at, latest.job_uid)
    decision = resume_policy.decide(written, env.get(RESUME_ENV) or resume_policy.ALWAYS, manager.job_uid)
    if report:
        log.info("%s (%s)", decision.message, manager.directory)
        if decision.set_aside:
            log.info("moved the checkpoints found to %s", manager.set_aside())
        # With the startup report, after the first step: the first report loads the API client, which on a CPU limit
        # slows rank 0 while the other ranks wait for it in the broadcast that follows and in the first step.
        reporter = ProgressReporter.from_environment(env)
        resumed = decision.resume
        startup.defer(lambda: reporter.report_resume(resumed))
    if decision.resume is None or latest is None:
        return 0
    state, _ = manager.load(latest)
    assign_state(variables, state, latest.path)
    if report:
        log.info("restored %s (epoch %d, metrics %s)", latest.path, latest.epoch, latest.metrics)
    return latest.epoch
