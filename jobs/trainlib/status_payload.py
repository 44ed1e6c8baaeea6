"""Pure builder of the status patch rank 0 sends to its DistributedTraining (no I/O, no Kubernetes client).

The operator owns every other status field (the chart's admission policy refuses a pod any other): a training
program only ever sets these two (merge patch): `status.progress = {epoch, epochs, step, metrics: {name: float},
headline, history: [{epoch, metrics}], updatedAt, startup: {attempt, worldUpAt, firstStepAt}}` and
`status.checkpoint = {path, epoch, resumedFrom: {path, epoch, writtenAt, jobUID}}`. `headline` names the metric the
program is judged by (`kubectl get dtr` shows it). `history` holds the last HISTORY_EPOCHS epochs, the current one
last. `startup` is the attempt's start (trainlib.startup), sent apart from the epochs' reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from trainlib.metrics import finite_metrics
from trainlib.resume_policy import Written

# Epochs in status.progress.history; the CRD's maxItems is the same number (a unit test compares them). The status goes
# to every watcher (the operator, `kubectl get -w`, notebooks) on every report. An epoch of 5 metrics is about 180
# bytes of JSON, so 100 epochs add about 18 KB. history.json next to the checkpoints keeps every epoch.
HISTORY_EPOCHS = 100


def rfc3339(moment: datetime) -> str:
    """UTC timestamp in the form Kubernetes uses, e.g. 2024-05-01T12:00:00Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_status_patch(*, epoch: int, epochs: int, step: int, metrics: Mapping[str, object], updated_at: datetime,
                       checkpoint_path: str | None = None, checkpoint_epoch: int | None = None,
                       headline: str | None = None, history: Iterable[Mapping[str, object]] = ()) -> dict:
    """The merge-patch body for the status subresource.

    `epoch` counts completed epochs (1-based), `step` completed optimizer steps. Metrics that are not finite numbers
    (NaN, inf, strings) are left out: JSON and the CRD schema take finite floats only. `history` is the run's records
    as history.json holds them (see `progress_history`). The checkpoint block is included only when a checkpoint is
    known.
    """
    progress: dict[str, object] = {"epoch": int(epoch), "epochs": int(epochs), "step": int(step),
                                   "metrics": finite_metrics(metrics),
                                   "history": progress_history(history, epoch, metrics),
                                   "updatedAt": rfc3339(updated_at)}
    if headline is not None:
        progress["headline"] = headline
    status: dict[str, object] = {"progress": progress}
    if checkpoint_path is not None and checkpoint_epoch is not None:
        status["checkpoint"] = {"path": checkpoint_path, "epoch": int(checkpoint_epoch)}
    return {"status": status}


def progress_history(records: Iterable[Mapping[str, object]], epoch: int,
                     metrics: Mapping[str, object]) -> list[dict[str, object]]:
    """status.progress.history: `[{epoch, metrics}]` in epoch order, at most HISTORY_EPOCHS, ending with `epoch`.

    `records` are history.json's (`{"epoch": n, <metric>: value, ...}`). Those of `epoch` and later are left out:
    `metrics` is this epoch's. A merge patch replaces a list whole, so every report sends the whole list.
    """
    entries: dict[int, dict[str, object]] = {}
    for record in records:
        number = record.get("epoch")
        if isinstance(number, int) and 1 <= number < epoch:
            entries[number] = {"epoch": number, "metrics": finite_metrics(
                {name: value for name, value in record.items() if name != "epoch"})}
    if epoch >= 1:
        entries[int(epoch)] = {"epoch": int(epoch), "metrics": finite_metrics(metrics)}
    return [entries[number] for number in sorted(entries)][-HISTORY_EPOCHS:]


def build_resume_patch(resumed: Written | None) -> dict:
    """The merge-patch body saying which checkpoint the attempt resumed from; None (a fresh start) removes it."""
    block = None if resumed is None else {"path": resumed.path, "epoch": int(resumed.epoch),
                                          "writtenAt": resumed.written_at, "jobUID": resumed.job_uid}
    return {"status": {"checkpoint": {"resumedFrom": block}}}


def build_startup_patch(*, attempt: int, world_up_at: datetime, first_step_at: datetime | None = None) -> dict:
    """The merge-patch body for rank 0's startup report (status.progress.startup): when Horovod's world was up and,
    once done, its first training step, in milliseconds, for attempt `attempt` (KUBETRAIN_ATTEMPT). Without a first
    step yet, `firstStepAt` is null, which removes an earlier attempt's (a merge patch keeps what it does not name)."""
    first_step = rfc3339_ms(first_step_at) if first_step_at is not None else None
    return {"status": {"progress": {"startup": {"attempt": int(attempt), "worldUpAt": rfc3339_ms(world_up_at),
                                                "firstStepAt": first_step}}}}


def rfc3339_ms(moment: datetime) -> str:
    """UTC timestamp with milliseconds, e.g. 2024-05-01T12:00:00.250Z."""
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
