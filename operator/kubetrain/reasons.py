"""Phases, condition types and reasons: the words the operator writes to status and events, declared once."""

from __future__ import annotations

# Phases (status.phase)
PENDING = "Pending"
STARTING = "Starting"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
TERMINAL_PHASES = (SUCCEEDED, FAILED)

# Condition types (status.conditions[].type)
COND_CREATED = "Created"
COND_WORKERS_READY = "WorkersReady"
COND_RUNNING = "Running"
COND_RESTARTING = "Restarting"
COND_SUSPENDED = "Suspended"
COND_SUCCEEDED = "Succeeded"
COND_FAILED = "Failed"
COND_SCHEDULED = "WorkersScheduled"
COND_CHECKPOINT_RESTORED = "CheckpointRestored"  # rank 0 resumed from a checkpoint (status.checkpoint.resumedFrom)

# Reasons
CHILDREN_CREATED = "ChildrenCreated"
WAITING_FOR_WORKERS = "WaitingForWorkers"
UNSCHEDULABLE = "Unschedulable"
GANG_UNSCHEDULABLE = "GangUnschedulable"  # spec.scheduling.gang: the workers cannot all be placed together (yet)
WORKERS_READY = "WorkersReady"
LAUNCHER_RUNNING = "LauncherRunning"
LAUNCHER_SUCCEEDED = "LauncherSucceeded"
LAUNCHER_FAILED = "LauncherFailed"
WORKER_FAILED = "WorkerFailed"
WORKER_LOST = "WorkerLost"
WORKERS_UNREACHABLE = "WorkersUnreachable"
# Disruptions: Kubernetes took a pod away (its DisruptionTarget condition); restarts that do not count by default.
NODE_LOST = "NodeLost"
PREEMPTED = "Preempted"
EVICTED = "Evicted"
DISRUPTED = "Disrupted"
IMAGE_PULL_FAILED = "ImagePullFailed"
DEADLINE_EXCEEDED = "DeadlineExceeded"
INVALID_SPEC = "InvalidSpec"
CHILD_CONFLICT = "ChildConflict"
# The API server refused a child (kubetrain.refusals): the first three wait and retry, the next two fail the job.
QUOTA_EXCEEDED = "QuotaExceeded"
OPERATOR_FORBIDDEN = "OperatorForbidden"
ADMISSION_UNAVAILABLE = "AdmissionUnavailable"
ADMISSION_DENIED = "AdmissionDenied"
KIND_NOT_SERVED = "KindNotServed"  # the cluster does not serve a kind the spec needs (a gang scheduler's PodGroup)
# A pass failed in a way the operator does not know (a server fault, a network error, a bug): it waits and retries.
SYNC_FAILED = "SyncFailed"
STATUS_UNREADABLE = "StatusUnreadable"  # a status time that is not RFC 3339: ignored, replaced by the operator's own
# The API server refuses the operator's list of a kind in the job's namespace (RBAC, an API not served): an event only.
WATCH_REFUSED = "WatchRefused"
# A failed attempt's launcher output could not be copied into its ConfigMap (kubetrain.manifests.attempt_log).
LOG_NOT_SAVED = "LogNotSaved"
WAITING_REFUSALS = (QUOTA_EXCEEDED, OPERATOR_FORBIDDEN, ADMISSION_UNAVAILABLE, SYNC_FAILED)
SUSPENDED_BY_USER = "SuspendedByUser"
RESUMED = "Resumed"
TTL_EXPIRED = "TTLExpired"
RESUMED_FROM_CHECKPOINT = "ResumedFromCheckpoint"  # a checkpoint this job wrote
RESUMED_FROM_ANOTHER_JOB = "ResumedFromAnotherJob"  # one a deleted job of the same name wrote (spec.checkpoint.resume)
# Elastic jobs (spec.elastic): a worker leaves and is replaced, or joins, while the launcher goes on.
COND_MIN_WORKERS_READY = "MinWorkersReady"
WORKER_LEFT = "WorkerLeft"
WORKER_JOINED = "WorkerJoined"
TOO_FEW_WORKERS = "TooFewWorkers"  # fewer than minWorkers Ready for longer than launcher.waitForWorkersSeconds
# Kueue (the job's kueue.x-k8s.io/queue-name label): the workers wait for quota, are admitted whole, or are stopped.
COND_ADMITTED = "Admitted"
WAITING_FOR_QUOTA = "WaitingForQuota"
ADMITTED = "Admitted"
PREEMPTED_BY_KUEUE = "PreemptedByKueue"
EVICTED_BY_KUEUE = "EvictedByKueue"
