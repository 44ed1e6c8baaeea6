"""Submit and follow DistributedTrainings from Python (a notebook), as `kubectl apply` and `kubetrain wait` do.

    from kubetrain.client import Client
    client = Client()
    client.create(name="mnist", image="kubetrain/mnist:0.1.0", command=["python", "-m", "mnist"], workers=2)
    client.wait("mnist", on_change=print)
    client.history("mnist")
    print(client.logs("mnist"))
"""

from kubetrain.client.client import Client
from kubetrain.client.errors import (
    ClientError,
    ClusterUnavailable,
    InvalidJob,
    JobFailed,
    JobNotFound,
    LogsNotFound,
    NoRankTags,
    WaitTimeout,
)
from kubetrain.client.jobs import Job

__all__ = ["Client", "ClientError", "ClusterUnavailable", "InvalidJob", "Job", "JobFailed", "JobNotFound",
           "LogsNotFound", "NoRankTags", "WaitTimeout"]
