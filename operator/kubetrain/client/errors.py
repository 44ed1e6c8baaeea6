"""What kubetrain.client raises: one error for each thing that can go wrong, each with a one-line message."""

from __future__ import annotations


class ClientError(Exception):
    """Anything kubetrain.client refuses or could not do."""


class ClusterUnavailable(ClientError):
    """No cluster answered, or it refused the request; the message says which server and why."""


class InvalidJob(ClientError, ValueError):
    """A job the API server would refuse; `field` is the path of the field at fault ("" when none applies)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"invalid DistributedTraining: {field}: {message}" if field
                         else f"invalid DistributedTraining: {message}")
        self.field = field
        self.message = message


class JobNotFound(ClientError, LookupError):
    """There is no such job, or it was deleted while being waited for."""


class WaitTimeout(ClientError, TimeoutError):
    """The job did not finish in time; `job` is where it was then (None if never seen)."""

    def __init__(self, message: str, job: object = None) -> None:
        super().__init__(message)
        self.job = job


class JobFailed(ClientError):
    """The job ended Failed; `reason` and `message` are its status's, `job` its last snapshot."""

    def __init__(self, text: str, reason: str, message: str, job: object = None) -> None:
        super().__init__(text)
        self.reason = reason
        self.message = message
        self.job = job


class LogsNotFound(ClientError, LookupError):
    """No launcher output to show: no launcher has started yet, the attempt's is not kept, or its log cannot be read."""


class NoRankTags(ClientError, ValueError):
    """A rank's lines were asked of launcher output whose lines carry no rank tag (an mpirun without --tag-output)."""
