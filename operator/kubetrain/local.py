"""`kubetrain run job.yaml --local`: run a DistributedTraining spec on this machine.

The same job.yaml the operator accepts, with workers x slotsPerWorker ranks started here by mpirun (or horovodrun),
the data and checkpoint volumes mapped to local folders, and the environment contract the pods get (without status
reporting: there is no cluster to report to). `plan_local_run` is pure; `run` starts the processes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubetrain.api import Job, SpecError, parse_job
from kubetrain.contract import KIND
from kubetrain.manifests.env import job_environment
from kubetrain.schema import unknown_field_paths

LAUNCHERS = ("mpirun", "horovodrun")
# Kubernetes expands $(NAME) in command and env values from the container's variables; $$ escapes a dollar.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class JobFileError(Exception):
    """A job.yaml that cannot be run; the message names the file and, for spec errors, the field."""


@dataclass(frozen=True)
class LocalPlan:
    """Everything `run` needs: the command line, its environment and the folders it uses."""

    argv: tuple[str, ...]
    command: tuple[str, ...]
    env: Mapping[str, str]
    num_processes: int
    data_dir: str
    checkpoint_dir: str
    hostfile: str
    hostfile_text: str
    warnings: tuple[str, ...] = ()


def load_job(path: str | os.PathLike[str], namespace: str | None = None) -> Job:
    """Read and validate a job.yaml: its one DistributedTraining (other documents are ignored), optionally placed in
    `namespace`."""
    body = read_job_file(path)
    try:
        return check_job(body, namespace)
    except SpecError as error:
        raise JobFileError(f"{path}: {error}") from None


def read_job_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The one DistributedTraining of a job.yaml, as written; other documents are ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise JobFileError(f"{path}: cannot read the job file: {error.strerror or error}") from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise JobFileError(f"{path}: not valid YAML: {error}") from None
    jobs = [doc for doc in documents if isinstance(doc, Mapping) and doc.get("kind") == KIND]
    if len(jobs) != 1:
        kinds = ", ".join(str(doc.get("kind")) for doc in documents if isinstance(doc, Mapping)) or "nothing"
        raise JobFileError(f"{path}: expected exactly one document with kind: {KIND}, found {len(jobs)} ({kinds})")
    return dict(jobs[0])


def check_job(body: Mapping[str, Any], namespace: str | None = None) -> Job:
    """A DistributedTraining judged as the API server judges it on create, then parsed; optionally placed in
    `namespace`. Raises SpecError naming the first field at fault (every unknown field at once)."""
    body = dict(body)
    if namespace:
        body["metadata"] = {**(body.get("metadata") or {}), "namespace": namespace}
    unknown = unknown_field_paths(body)
    if unknown:
        (where, message), rest = unknown[0], unknown[1:]
        raise SpecError(where, "; ".join([message, *(f"{path}: {said}" for path, said in rest)]))
    return parse_job(body)


def expand_references(text: str, variables: Mapping[str, str]) -> str:
    """Kubernetes' $(NAME) expansion: defined names are replaced, undefined ones kept as written, $$ -> $."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return variables.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


def map_volume_paths(value: str, volumes: Mapping[str, str]) -> str:
    """A container path under a volume's mountPath (also as `--flag=/path`) as the path under its local folder."""
    prefix, separator, path = value.partition("=") if value.startswith("-") else ("", "", value)
    for mount_path in sorted(volumes, key=len, reverse=True):
        if path == mount_path or path.startswith(mount_path + "/"):
            return f"{prefix}{separator}{volumes[mount_path]}{path[len(mount_path) :]}"
    return value


def local_hostfile(num_processes: int) -> str:
    """All ranks on this machine (slots = ranks, so mpirun never refuses to oversubscribe a small laptop)."""
    return f"localhost slots={num_processes}\n"


def plan_local_run(
    job: Job,
    *,
    data_dir: str,
    checkpoint_root: str,
    hostfile: str,
    launcher: str = "mpirun",
    environ: Mapping[str, str] | None = None,
    is_root: bool = False,
    extra_args: Sequence[str] = (),
) -> LocalPlan:
    """The command (spec.command + `extra_args`) and environment for running `job` here; `data_dir` and
    `checkpoint_root` stand in for the data and checkpoint volumes."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    base_env = dict(os.environ if environ is None else environ)
    warnings: list[str] = []
    # The volumes' mount paths stand for local folders wherever they appear: the contract, spec.env and spec.command.
    volumes = {
        job.spec.data.mount_path: os.path.abspath(data_dir),
        job.spec.checkpoint.mount_path: os.path.abspath(checkpoint_root),
    }
    contract = {name: map_volume_paths(value, volumes) for name, value in job_environment(job, in_pod=False).items()}
    contract["KUBETRAIN_HOSTFILE"] = os.path.abspath(hostfile)
    # This machine has no status to report to, and no GPUs were given to the ranks: they use what they find.
    for name in ("KUBETRAIN_REPORT_STATUS", "KUBETRAIN_GPUS_PER_RANK"):
        base_env.pop(name, None)
    env = {**base_env, **contract}
    # $(NAME) refers to the container's own variables, as in a pod: the contract, then spec.env in order.
    container_env = dict(contract)
    for index, entry in enumerate(job.spec.env):
        name = entry["name"]
        if "value" in entry:
            env[name] = container_env[name] = map_volume_paths(
                expand_references(entry["value"], container_env), volumes
            )
        elif name not in base_env:
            warnings.append(
                f"spec.env[{index}] ({name}) takes its value from the cluster (valueFrom); it is unset here: "
                f"export {name} before `kubetrain run --local` to give it a value"
            )
    command = [
        map_volume_paths(expand_references(part, container_env), volumes) for part in [*job.spec.command, *extra_args]
    ]
    forward = [name for name in env["KUBETRAIN_FORWARD_ENV"].split() if name in env]
    np = job.spec.num_processes
    if launcher == "mpirun":
        argv = [
            "mpirun",
            "-np",
            str(np),
            "--hostfile",
            contract["KUBETRAIN_HOSTFILE"],
            "--bind-to",
            "none",
            "--map-by",
            "slot",
        ]
        if is_root:
            argv.append("--allow-run-as-root")
        for name in dict.fromkeys(["PATH", "LD_LIBRARY_PATH", "PYTHONPATH", *forward]):
            if name in env:
                argv += ["-x", name]
    else:
        # horovodrun passes the whole environment to local ranks.
        argv = ["horovodrun", "-np", str(np), "-H", f"localhost:{np}"]
    return LocalPlan(
        argv=(*argv, *command),
        command=tuple(command),
        env=env,
        num_processes=np,
        data_dir=contract["KUBETRAIN_DATA_DIR"],
        checkpoint_dir=contract["KUBETRAIN_CHECKPOINT_DIR"],
        hostfile=contract["KUBETRAIN_HOSTFILE"],
        hostfile_text=local_hostfile(np),
        warnings=tuple(warnings),
    )


def default_launcher() -> str:
    """mpirun when it is on PATH (what the launcher pod runs), else horovodrun."""
    return "mpirun" if shutil.which("mpirun") else "horovodrun"


def run(
    job: Job,
    *,
    data_dir: str | None,
    checkpoint_root: str,
    launcher: str | None = None,
    extra_args: Sequence[str] = (),
    stream: Any = None,
) -> int:
    """Run the job here and return the program's exit code (128 + signal number when a signal ended it)."""
    stream = stream or sys.stderr
    data_dir = data_dir or job.spec.data.mount_path
    if not os.path.isdir(data_dir):
        raise JobFileError(
            f"data directory {data_dir} does not exist: pass --data-dir DIR, the local folder that stands in for "
            "spec.data"
        )
    launcher = launcher or default_launcher()
    if shutil.which(launcher) is None:
        raise JobFileError(f"{launcher} is not on PATH: install OpenMPI (mpirun) or Horovod (horovodrun)")
    with tempfile.TemporaryDirectory(prefix="kubetrain-local-") as scratch:
        plan = plan_local_run(
            job,
            data_dir=data_dir,
            checkpoint_root=checkpoint_root,
            hostfile=os.path.join(scratch, "hostfile"),
            launcher=launcher,
            is_root=os.geteuid() == 0,
            extra_args=extra_args,
        )
        Path(plan.hostfile).write_text(plan.hostfile_text, encoding="utf-8")
        os.makedirs(plan.checkpoint_dir, exist_ok=True)
        for warning in [*plan.warnings, *_interpreter_warning(plan)]:
            print(f"kubetrain: warning: {warning}", file=stream)
        print(
            f"kubetrain: running {job.namespace}/{job.name} locally with {plan.num_processes} rank(s); "
            f"data {plan.data_dir}, checkpoints {plan.checkpoint_dir}",
            file=stream,
            flush=True,
        )
        return _execute(plan)


def _interpreter_warning(plan: LocalPlan) -> list[str]:
    """Ranks find `python` on PATH; say so when that is not the environment kubetrain itself runs from."""
    program = plan.command[0]
    if os.path.basename(program) not in ("python", "python3") or os.path.isabs(program):
        return []
    found = shutil.which(program, path=plan.env.get("PATH"))
    if found and os.path.dirname(os.path.abspath(found)) == os.path.dirname(os.path.abspath(sys.executable)):
        return []
    return [
        f"`{program}` on PATH is {found or 'missing'}, not the Python kubetrain runs from ({sys.executable}); "
        "activate the environment the training program is installed in if the ranks cannot import it"
    ]


def _execute(plan: LocalPlan) -> int:
    """Start the launcher in its own process group; Ctrl-C / SIGTERM stop the whole run, then we report its code."""
    process = subprocess.Popen(plan.argv, env=dict(plan.env), start_new_session=True)

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code
