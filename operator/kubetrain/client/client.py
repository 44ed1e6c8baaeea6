"""`Client`: create, list, get, delete and wait for DistributedTrainings and read their launcher output from Python, as
kubectl, `kubetrain wait` and `kubetrain logs` would. The decisions are in kubetrain.client.spec and .jobs (and
kubetrain.logs); here are the calls to the cluster."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, overload

from kubetrain import follow, follow_loop, kube, logs, logs_loop, reasons
from kubetrain.client import jobs
from kubetrain.client.errors import (
    ClusterUnavailable,
    InvalidJob,
    JobFailed,
    JobNotFound,
    LogsNotFound,
    NoRankTags,
    WaitTimeout,
)
from kubetrain.client.jobs import Job, failed_text, job_from_body, job_of
from kubetrain.client.spec import JobSource, body_from, body_from_arguments, placed


@contextlib.contextmanager
def _cluster_answers() -> Iterator[None]:
    try:
        yield
    except kube.ClusterError as error:
        raise ClusterUnavailable(str(error)) from None


@contextlib.contextmanager
def _log_answers() -> Iterator[None]:
    """kubetrain logs' errors, as this client's."""
    try:
        with _cluster_answers():
            yield
    except follow_loop.JobNotFound as missing:
        raise JobNotFound(str(missing)) from None
    except logs.LogsNotFound as missing:
        raise LogsNotFound(str(missing)) from None
    except logs.NoRankTags as untagged:
        raise NoRankTags(str(untagged)) from None


class Client:
    """The cluster kubectl would use ($KUBECONFIG or ~/.kube/config, else the pod's service account).

    `namespace` defaults to the kubeconfig context's, as kubectl's does. Nothing is sent until a method is called.
    """

    def __init__(self, namespace: str | None = None) -> None:
        with _cluster_answers():
            self.cluster = kube.connect()
        self.namespace = namespace or self.cluster.namespace
        # Each job's epochs as `wait` saw them: the status keeps the last ones (an older trainlib's, the latest only).
        self._seen: dict[str, list[Job]] = {}

    def create(self, job: JobSource | None = None, /, *, name: str | None = None, image: str | None = None,
               command: Sequence[str] | None = None, **spec: Any) -> Job:
        """Create a job from a dict, a job.yaml path, or keyword arguments (name, image, command, spec fields).

        It is checked as the API server would check it first: InvalidJob names the field, and nothing is sent.
        """
        if job is not None and (name or image or command or spec):
            raise TypeError("create() takes a job (dict or path) or keyword arguments, not both")
        if job is None:
            if not (name and image and command):
                missing = [word for word, value in (("name", name), ("image", image), ("command", command))
                           if not value]
                field = "metadata.name" if "name" in missing else f"spec.{missing[0]}"
                raise InvalidJob(field, f"Required value: create() needs {', '.join(missing)}")
            body = body_from_arguments(name, image, command, **spec)
        else:
            body = body_from(job)
        with _cluster_answers():
            return job_from_body(kube.create_training(self.cluster, placed(body, self.namespace)))

    def get(self, name: str) -> Job:
        """The job as it is now; JobNotFound when there is none."""
        return job_from_body(self._body(name))

    def _body(self, name: str) -> dict[str, Any]:
        with _cluster_answers():
            body, _ = kube.list_training(self.cluster, self.namespace, name)
        if body is None:
            raise JobNotFound(follow.not_found(self.namespace, name))
        return body

    def list(self) -> builtins.list[Job]:
        """Every job of the namespace, by name."""
        with _cluster_answers():
            bodies = kube.list_trainings(self.cluster, self.namespace)
        return sorted((job_from_body(body) for body in bodies), key=lambda job: job.name)

    def delete(self, name: str) -> None:
        """Delete the job; its pods go in the background. JobNotFound when there is none."""
        with _cluster_answers():
            removed = kube.remove_training(self.cluster, self.namespace, name)
        if not removed:
            raise JobNotFound(follow.not_found(self.namespace, name))
        self._seen.pop(name, None)

    def wait(self, name: str, timeout: float | None = None,
             on_change: Callable[[Job], object] | None = None) -> Job:
        """Follow the job with a watch until it finishes, as `kubetrain wait` does; return how it ended.

        `on_change` gets the job now, then after each change of phase, reason, workers, epoch, metric or restarts.
        Raises JobFailed (with reason and message) when it Failed, WaitTimeout after `timeout` seconds, JobNotFound
        when there is no such job or it is deleted first.
        """
        snap: follow.Snapshot | None = None
        last: Job | None = None
        try:
            with _cluster_answers():
                for snap in follow_loop.watch_changes(self.cluster, self.namespace, name, timeout):
                    if snap is None:
                        raise JobNotFound(follow.deleted(self.namespace, name))
                    last = job_of(self.namespace, name, snap)
                    self._seen.setdefault(name, []).append(last)
                    if on_change is not None:
                        on_change(last)
        except follow_loop.JobNotFound as missing:
            raise JobNotFound(str(missing)) from None
        except TimeoutError:
            raise WaitTimeout(follow.timed_out(self.namespace, name, timeout or 0, snap), last) from None
        if last is None:  # watch_changes yields the job first, or raises
            raise JobNotFound(follow.not_found(self.namespace, name))
        if last.phase == reasons.FAILED:
            raise JobFailed(failed_text(last), last.reason, last.message, last)
        return last

    def history(self, name: str, as_frame: bool = False) -> Any:
        """The job's metrics per epoch: rows `{"epoch": n, <metric>: value, ...}` in epoch order (a DataFrame
        indexed by epoch with `as_frame`). JobNotFound when there is no such job.

        The rows are the status's history, which any client reads, also after the job ended: rank 0's last epochs
        (status.progress.history, at most 100). Older epochs come from what this client's `wait` saw. A job whose
        rank 0 sends no history (an older trainlib) has the epochs `wait` saw and the latest one.
        """
        rows = jobs.job_history(self._body(name), self._seen.get(name, []))
        return jobs.as_frame(rows) if as_frame else rows

    @overload
    def logs(self, name: str, attempt: int | None = None, rank: int | None = None,
             follow: Literal[False] = False) -> str: ...

    @overload
    def logs(self, name: str, attempt: None = None, rank: int | None = None, *,
             follow: Literal[True]) -> Iterator[str]: ...

    def logs(self, name: str, attempt: int | None = None, rank: int | None = None,
             follow: bool = False) -> str | Iterator[str]:
        """The launcher's output of the current attempt, as `kubetrain logs` prints it: every rank's lines.

        `attempt` picks an earlier one, numbered as status.attempt (the first is 0): the operator keeps the end of
        the last failed attempts'. `rank` keeps only the lines tagged as that rank's. With `follow`, an iterator of
        the lines as they come, the next attempts' after a restart, until the job finishes (then `get` says how).
        Raises JobNotFound, LogsNotFound (no launcher started yet, an attempt not kept, a log that cannot be read),
        NoRankTags or ClusterUnavailable; with `follow`, as the lines are read.
        """
        if follow and attempt is not None:
            raise ValueError("attempt shows an attempt that ended; follow follows the current one: use one of them")
        if follow:
            return self._follow_logs(name, rank)
        with _log_answers():
            return logs_loop.read_logs(self.cluster, self.namespace, name, attempt, rank).text

    def _follow_logs(self, name: str, rank: int | None) -> Iterator[str]:
        with _log_answers():
            for item in logs_loop.follow_logs(self.cluster, self.namespace, name, rank):
                if isinstance(item, logs_loop.Output):
                    yield from item.text.splitlines()
                else:
                    yield item[1]
