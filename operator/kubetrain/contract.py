"""The names, labels, paths and environment variables that the operator, the entrypoints and the training programs
agree on: one place for each, below both the spec parser (kubetrain.api) and the builders (kubetrain.manifests)."""

from __future__ import annotations

# The resource
GROUP = "kubetrain.dev"
VERSION = "v1alpha1"
PLURAL = "distributedtrainings"
KIND = "DistributedTraining"

# Labels on every child, and the roles they name
LABEL_JOB = "kubetrain.dev/job-name"
LABEL_ROLE = "kubetrain.dev/role"
LABEL_INDEX = "kubetrain.dev/replica-index"
LABEL_ATTEMPT = "kubetrain.dev/attempt"
ROLE_WORKER = "worker"
ROLE_LAUNCHER = "launcher"
ROLE_CONFIG = "config"
ROLE_ATTEMPT_LOG = "attempt-log"  # the ConfigMap that keeps a failed attempt's launcher output (<name>-attempt-<N>-log)
# Each pod's main container is named for its role: a podTemplate entry of that name changes that pod only.
CONTAINER_NAMES = (ROLE_WORKER, ROLE_LAUNCHER)

# spec.tensorboard: the container the pod where rank 0 runs gets, and its named port (`kubetrain tensorboard` forwards
# a port of this machine to it).
TENSORBOARD_CONTAINER = "tensorboard"
TENSORBOARD_PORT_NAME = "tensorboard"
# Not TensorBoard's usual 6006. Port 6000 + n is X display :n, and hwloc, which the MPI loads as it starts, probes
# displays :0 to :9 there. A TensorBoard on 6006 answered, and every MPI start in its pod waited for ever.
TENSORBOARD_PORT = 8006

# The image an init container copies the entrypoints from (images/entrypoints), tagged with the chart's appVersion;
# the chart's entrypoints.image sets another (KUBETRAIN_ENTRYPOINTS_IMAGE), e.g. a mirror.
ENTRYPOINTS_IMAGE = "kubetrain/entrypoints:0.1.0"
INIT_CONTAINER = "kubetrain-entrypoints"

# MPI implementations (spec.mpi.implementation): each one's hostfile line for a host with n slots.
MPI_IMPLEMENTATIONS = {"OpenMPI": "{host} slots={slots}", "IntelMPI": "{host}:{slots}", "MPICH": "{host}:{slots}"}

# Paths inside every pod: what kubetrain mounts, and what kubetrain's own images (FROM kubetrain/base) hold
SSH_PORT = 2222
SSH_DIR = "/etc/kubetrain/ssh"
HOSTS_DIR = "/etc/kubetrain/hosts"
HOSTFILE = f"{HOSTS_DIR}/hostfile"
# An elastic job's every possible host as `host:slots` (the launcher with runAsWorker, workers 0..maxWorkers-1).
ELASTIC_HOSTS = f"{HOSTS_DIR}/elastic-hosts"
HOME_DIR = "/home/kubetrain"
ENTRYPOINTS = "/opt/kubetrain/entrypoints"
VENV = "/opt/venv"
# Volumes may not land on what kubetrain mounts itself ...
RESERVED_MOUNT_PATHS = ("/etc/kubetrain", HOME_DIR, "/tmp", "/dev/shm")
# ... nor on, under or above what the image needs (the CRD's mountPath rules list the same paths).
IMAGE_PATHS = (VENV, "/opt/kubetrain", "/run/sshd", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/sys",
               "/dev")

# The launcher's failure report: the MPI command runs through images/entrypoints/lib/run_with_report.py, which writes
# it to the launcher container's terminationMessagePath when the command fails (kubetrain.failure_report reads it).
# lib/failure_report.py has the same kind and bounds (tests/unit/images/test_failure_report.py compares them).
TERMINATION_LOG = "/dev/termination-log"
FAILURE_REPORT_KIND = "kubetrain.dev/failure-report/v1"
FAILURE_LINES = 20  # a rank's last lines, at most this many ...
FAILURE_LINE_CHARS = 200  # ... each cut to this many characters ...
FAILURE_LINES_BYTES = 2048  # ... and this many bytes together
TERMINATION_MESSAGE_BYTES = 4096  # what Kubernetes keeps of a container's termination message

# Environment: every name starting with the prefix is kubetrain's (kubetrain.manifests.env sets them).
ENV_PREFIX = "KUBETRAIN_"
# Open MPI 4.1 with libfabric 1.17 (Debian 12's, in every kubetrain image) can deadlock in MPI_Init: a rank waits for
# ever on a lock in the OFI components' memory monitor (opal_common_ofi_export_memory_monitor), before it prints a
# line. kubetrain's pods talk TCP and shared memory, so no OFI provider is considered, unless the job's env sets this
# variable itself (say, to use a fabric its nodes have). An environment variable, not `--mca btl ^ofi`: horovodrun
# puts its own `-mca btl` on mpirun's command line, and a second one is refused.
OPEN_MPI_ENV = {"OMPI_MCA_opal_common_ofi_provider_include": "none"}


def worker_name(name: str, index: int) -> str:
    return f"{name}-worker-{index}"


def job_of_worker(pod_name: str) -> str | None:
    """The job a worker pod's name belongs to (the inverse of `worker_name`), or None for any other name."""
    job, sep, index = pod_name.rpartition("-worker-")
    return job if sep and job and index.isdigit() else None


def launcher_name(name: str) -> str:
    return f"{name}-launcher"


def attempt_log_name(name: str, attempt: int) -> str:
    """The ConfigMap holding the end of attempt `attempt`'s launcher output (numbered as status.attempt)."""
    return f"{name}-attempt-{attempt}-log"


def service_name(name: str) -> str:
    return name


def ready_service_name(name: str) -> str:
    """The headless Service that lists only Ready workers: an elastic job's launcher discovers hosts by its DNS."""
    return f"{name}-ready"


def ssh_secret_name(name: str) -> str:
    return f"{name}-ssh"


def hosts_configmap_name(name: str) -> str:
    return f"{name}-hosts"


def pod_group_name(name: str) -> str:
    """The gang's PodGroup (spec.scheduling.gang): the workers, not the launcher, which starts after them."""
    return f"{name}-workers"
