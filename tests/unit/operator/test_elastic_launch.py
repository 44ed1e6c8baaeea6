"""What an elastic job's launcher runs: the horovodrun command line (images/entrypoints/lib/elastic.sh, run in bash and
parsed by Horovod 0.28.1's own horovodrun parser), the timeout lib/horovodrun.py gives its sockets, and the host
discovery it gives Horovod (lib/discover_hosts.py) over the hosts file the operator writes. Real containers run them
in the images tier (tests/images/test_elastic.py)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from dtr_bodies import training

from kubetrain.api import parse_job
from kubetrain.contract import ELASTIC_HOSTS
from kubetrain.manifests.env import job_environment
from kubetrain.manifests.hosts import build_hosts_configmap

LIB = Path(__file__).resolve().parents[3] / "images" / "entrypoints" / "lib"
PYTHON = "/opt/venv/bin/python"
ENTRYPOINTS_LIB = "/opt/kubetrain/entrypoints/lib"
KEY = "/home/kubetrain/.ssh/id_ed25519"


def load(name: str) -> ModuleType:
    """A Python script of the entrypoints, as a module."""
    spec = importlib.util.spec_from_file_location(name, LIB / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


discover = load("discover_hosts")
runner = load("horovodrun")


def elastic_job(launcher_runs_ranks: bool = False, slots: int = 1):
    body = training(workers=2, slotsPerWorker=slots, resources={}, elastic={"minWorkers": 1, "maxWorkers": 3})
    body["metadata"] = {"name": "t", "namespace": "ns", "uid": "u"}
    body["spec"]["launcher"] = {"runAsWorker": launcher_runs_ranks}
    return parse_job(body)


def elastic_hosts_text(launcher_runs_ranks: bool = False, slots: int = 1) -> str:
    return build_hosts_configmap(elastic_job(launcher_runs_ranks, slots))["data"][ELASTIC_HOSTS.rsplit("/", 1)[1]]


def bash(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f'set -euo pipefail; . "{LIB}/elastic.sh"; {script}', "elastic.sh", *args],
                          capture_output=True, text=True, timeout=10)


def command(minimum: int = 1, maximum: int = 3, slots: int = 1, own: int = 0, iface: str = "eth0",
            pod_names: str = "", program: tuple[str, ...] = ("python", "-c", "print('a b')")) -> list[str]:
    script = 'kt_elastic_command "$@"; printf "%s\\0" "${KT_ELASTIC_ARGV[@]}"'
    result = bash(script, PYTHON, ENTRYPOINTS_LIB, str(minimum), str(maximum), str(slots), str(own), iface, "300",
                  "2222", KEY, pod_names, *program)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\0")[:-1]


def horovodrun_arguments(argv: list[str], monkeypatch: pytest.MonkeyPatch):
    """What Horovod 0.28.1's horovodrun makes of the command line after `env -u ... PYTHON LIB/horovodrun.py`."""
    from horovod.runner.launch import parse_args

    start = argv.index(f"{ENTRYPOINTS_LIB}/horovodrun.py")
    assert argv[start - 1] == PYTHON
    monkeypatch.setattr(sys, "argv", ["horovodrun", *argv[start + 1 :]])
    return parse_args()


def test_horovodrun_runs_elastic_from_min_to_max_workers_with_the_jobs_ssh(monkeypatch):
    argv = command(minimum=1, maximum=3, slots=2)
    args = horovodrun_arguments(argv, monkeypatch)
    assert (args.num_proc, args.min_num_proc, args.max_num_proc) == (2, 2, 6)
    assert args.host_discovery_script == f"{PYTHON} {ENTRYPOINTS_LIB}/discover_hosts.py"  # run through a shell
    assert args.nics == {"eth0"}
    assert args.cooldown_range == [5, 60]  # a replacement under the same name is used again
    assert args.elastic_timeout == 300
    assert (args.ssh_port, args.ssh_identity_file) == (2222, KEY)
    assert args.use_gloo
    assert args.command == ["python", "-c", "print('a b')"]


def test_the_launchers_own_ranks_count_in_min_and_max(monkeypatch):
    args = horovodrun_arguments(command(minimum=2, maximum=4, slots=2, own=2), monkeypatch)
    assert (args.num_proc, args.min_num_proc, args.max_num_proc) == (6, 6, 10)


def test_without_a_default_route_horovod_finds_the_interface_itself(monkeypatch):
    args = horovodrun_arguments(command(iface=""), monkeypatch)
    assert args.nics is None


def test_launcher_only_variables_stay_off_the_ranks_command_line():
    argv = command()
    prefix = argv[: argv.index(PYTHON)]
    assert prefix == ["env", "-u", "HOSTNAME", "-u", "NVIDIA_VISIBLE_DEVICES", "-u", "NVIDIA_DRIVER_CAPABILITIES",
                      "-u", "KT_POD_ENV_FILE"]
    for kept in ("PATH", "HOME", "LD_PRELOAD", "NSS_WRAPPER_PASSWD"):  # same values on the workers; ssh needs them
        assert kept not in prefix


def test_horovodrun_never_holds_a_secret_it_would_write_into_every_ranks_command_line(monkeypatch):
    """horovodrun copies its whole environment into each rank's `ssh host 'env K=V ... command'`: the job's
    KUBETRAIN_POD_ENV names (secretKeyRef, fieldRef, resourceFieldRef) are not in it, and each rank starts through
    lib/pod-env.sh, which gives it its own pod's values."""
    program = ("bash", f"{ENTRYPOINTS_LIB}/pod-env.sh", "python", "train.py")
    argv = command(pod_names="TOKEN NODE", program=program)
    prefix = argv[: argv.index(PYTHON)]
    env = {"PATH": "/usr/bin:/bin", "TOKEN": "s3cr3t", "NODE": "launcher-node", "SEED": "1"}
    seen = subprocess.run([*prefix, "env"], env=env, capture_output=True, text=True, check=True).stdout
    assert "s3cr3t" not in seen and "launcher-node" not in seen and "SEED=1" in seen
    assert horovodrun_arguments(argv, monkeypatch).command == list(program)


def test_a_rank_gets_its_own_pods_saved_values_whatever_its_characters(tmp_path):
    """What each pod's entrypoint saves (kt_save_pod_env), lib/pod-env.sh gives the rank, over the launcher's."""
    value = "it's \"quoted\" $(not run) `nor this` \\ and\na second line"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBETRAIN_POD_ENV": "TOKEN NODE UNSET",
           "TOKEN": value, "NODE": "worker-node"}
    saved = subprocess.run(["bash", "-c", f'set -euo pipefail; . "{LIB}/common.sh"; kt_save_pod_env; '
                                          'printf %s "$KT_POD_ENV_FILE"'], env=env, capture_output=True, text=True)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == f"{tmp_path}/.kubetrain/pod-env"
    assert (tmp_path / ".kubetrain/pod-env").stat().st_mode & 0o77 == 0, "readable by the pod's uid only"
    rank_env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "KT_POD_ENV_FILE": saved.stdout,
                "NODE": "launcher-node"}
    script = 'printf "%s\\0" "$TOKEN" "$NODE" "${UNSET-unset}"'
    rank = subprocess.run(["bash", str(LIB / "pod-env.sh"), "bash", "-c", script], env=rank_env,
                          capture_output=True, text=True)
    assert rank.returncode == 0, rank.stderr
    assert rank.stdout.split("\0")[:-1] == [value, "worker-node", "unset"]


def test_horovodrun_runs_with_a_timeout_on_its_sockets(monkeypatch):
    """Horovod's driver would wait minutes on a connect to a lost rank 0, holding its host lock."""
    import horovod.runner.launch as launch

    seen = {}
    monkeypatch.setattr(launch, "run_commandline", lambda: seen.update(timeout=socket.getdefaulttimeout(),
                                                                       program=sys.argv[0]))
    monkeypatch.setattr(sys, "argv", [f"{ENTRYPOINTS_LIB}/horovodrun.py", "-np", "1"])
    try:
        assert runner.main() == 0
    finally:
        socket.setdefaulttimeout(None)
    assert seen == {"timeout": runner.TIMEOUT_SECONDS, "program": "horovodrun"}


@pytest.mark.parametrize(("shebang", "python"), [
    ("#!/opt/venv/bin/python", "/opt/venv/bin/python"),
    ("#!/usr/bin/python3.11 -E", "/usr/bin/python3.11"),
    ("#!/usr/bin/env python3", "python3"),
    ("#!/bin/sh", ""),  # pip's wrapper for a long path: the launcher falls back to python3
    ("import sys", ""),
])
def test_the_discovery_runs_with_horovodruns_own_python(shebang, python):
    result = bash('kt_elastic_python "$1"', shebang)
    assert (result.returncode, result.stdout.strip()) == (0, python)


def test_the_operators_hosts_file_lists_every_possible_host_as_host_colon_slots():
    hosts = discover.parse_hosts(elastic_hosts_text(launcher_runs_ranks=True, slots=2))
    assert hosts == [("t-launcher", "t-launcher:2"), ("t-worker-0.t.ns.svc", "t-worker-0.t.ns.svc:2"),
                     ("t-worker-1.t.ns.svc", "t-worker-1.t.ns.svc:2"), ("t-worker-2.t.ns.svc", "t-worker-2.t.ns.svc:2")]


def test_the_launcher_gets_the_discoverys_inputs_from_the_operator():
    env = job_environment(elastic_job())
    assert env["KUBETRAIN_ELASTIC_HOSTS"] == ELASTIC_HOSTS
    assert env["KUBETRAIN_READY_SERVICE"] == "t-ready.ns.svc"
    assert (env["KUBETRAIN_ELASTIC_MIN_WORKERS"], env["KUBETRAIN_ELASTIC_MAX_WORKERS"]) == ("1", "3")


DNS = {"t-worker-0.t.ns.svc": {"10.0.0.5"}, "t-worker-1.t.ns.svc": {"10.0.0.6"}, "t-worker-2.t.ns.svc": set()}


def test_only_workers_whose_address_is_ready_are_printed_and_the_launcher_always():
    hosts = discover.parse_hosts(elastic_hosts_text(launcher_runs_ranks=True))
    lines = discover.ready_lines(hosts, "t-launcher", {"10.0.0.6"}, DNS.__getitem__)
    assert lines == ["t-launcher:1", "t-worker-1.t.ns.svc:1"]
    assert discover.ready_lines(hosts, "t-launcher", set(), DNS.__getitem__) == ["t-launcher:1"]


def test_a_worker_name_with_an_old_address_is_not_ready():
    """A replaced pod: its name resolves to the new pod, the Ready set still has the old pod's IP."""
    hosts = discover.parse_hosts(elastic_hosts_text())
    assert discover.ready_lines(hosts, "t-launcher", {"10.0.0.99"}, DNS.__getitem__) == []


def test_a_malformed_line_is_refused():
    with pytest.raises(ValueError, match="not a host:slots line"):
        discover.parse_hosts("t-worker-0.t.ns.svc slots=1\n")


def fake_dns(answers: dict[str, list[str] | int]):
    """getaddrinfo over `answers`: a name's IPv4 addresses, or the EAI_* error it raises."""

    def getaddrinfo(name, port, family=0, kind=0, *rest):
        answer = answers.get(name, socket.EAI_NONAME)
        if isinstance(answer, int):
            raise socket.gaierror(answer, "lookup failed")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0)) for ip in answer]

    return getaddrinfo


def run_discovery(monkeypatch, capsys, tmp_path, answers) -> tuple[int, str, str]:
    hosts_file = tmp_path / "elastic-hosts"
    hosts_file.write_text(elastic_hosts_text())
    monkeypatch.setenv("KUBETRAIN_ELASTIC_HOSTS", str(hosts_file))
    monkeypatch.setenv("KUBETRAIN_READY_SERVICE", "t-ready.ns.svc")
    monkeypatch.setattr(socket, "getaddrinfo", fake_dns(answers))
    monkeypatch.setattr(socket, "gethostname", lambda: "t-launcher")
    code = discover.main()
    out = capsys.readouterr()
    return code, out.out, out.err


def test_discovery_prints_the_ready_workers(monkeypatch, capsys, tmp_path):
    answers = {"t-ready.ns.svc": ["10.0.0.5", "10.0.0.7"], "t-worker-0.t.ns.svc": ["10.0.0.5"],
               "t-worker-1.t.ns.svc": ["10.0.0.6"], "t-worker-2.t.ns.svc": ["10.0.0.7"]}
    assert run_discovery(monkeypatch, capsys, tmp_path, answers) == (0, "t-worker-0.t.ns.svc:1\n"
                                                                        "t-worker-2.t.ns.svc:1\n", "")


def test_no_ready_worker_is_an_empty_answer_not_an_error(monkeypatch, capsys, tmp_path):
    """The Ready-only Service's name does not exist while no worker is Ready (NXDOMAIN)."""
    assert run_discovery(monkeypatch, capsys, tmp_path, {}) == (0, "", "")


@pytest.mark.parametrize("failing", ["t-ready.ns.svc", "t-worker-1.t.ns.svc"])
def test_dns_trouble_exits_1_so_horovod_keeps_its_hosts(monkeypatch, capsys, tmp_path, failing):
    answers: dict[str, list[str] | int] = {"t-ready.ns.svc": ["10.0.0.5"], "t-worker-0.t.ns.svc": ["10.0.0.5"],
                                           failing: socket.EAI_AGAIN}
    code, out, err = run_discovery(monkeypatch, capsys, tmp_path, answers)
    assert (code, out) == (1, "")
    assert err.startswith(f"kubetrain discovery: cannot resolve {failing}: "), err
