"""What each MPI implementation gets: the hostfile the operator writes and the command line the launcher entrypoint
builds from spec.mpi.implementation and what the image's MPI says it is (`--version`, as the real launchers print it).
The entrypoint's pure functions (images/entrypoints/lib/mpi.sh) run in bash; the MPIs themselves run in the images
tier (tests/images/test_own_image.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dtr_bodies import training

from kubetrain.api import parse_job
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job

MPI_SH = Path(__file__).resolve().parents[3] / "images" / "entrypoints" / "lib" / "mpi.sh"
# First lines of `<launcher> --version` as each MPI prints them (Open MPI 4 from Debian, the rest from PyPI's wheels).
VERSIONS = {
    "openmpi4": "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/",
    "openmpi5": "mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/",
    "mpich": "HYDRA build details:\n    Version:                                 5.0.2\n    Release Date: ...",
    "intelmpi": "Intel(R) MPI Library for Linux* OS, Version 2021.14 Build 20250213 (id: 0d7f579)\nCopyright ...",
}
IMPLEMENTATION = {"openmpi4": "OpenMPI", "openmpi5": "OpenMPI", "mpich": "MPICH", "intelmpi": "IntelMPI"}
def named(body: dict) -> dict:
    """The job `t` in namespace `ns`."""
    return {**body, "metadata": {"name": "t", "namespace": "ns", "uid": "u"}}


SSH = "-F /h/.ssh/ssh_config -i /h/.ssh/id_ed25519 -p 2222 -o StrictHostKeyChecking=no"


def bash(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f'set -euo pipefail; . "{MPI_SH}"; {script}', "mpi.sh", *args],
                          capture_output=True, text=True, timeout=10)


def flavor(implementation: str, version: str) -> tuple[int, str]:
    result = bash('kt_mpi_flavor "$1" "$2"', implementation, version)
    return result.returncode, result.stdout.strip()


def command(flavor_name: str, as_root: str = "0", names: str = "PATH KUBETRAIN_JOB_NAME",
            iface: str = "eth0") -> list[str]:
    script = 'kt_mpi_command "$@"; printf "%s\\0" "${KT_MPI_ARGV[@]}"'
    result = bash(script, flavor_name, "4", "/etc/kubetrain/hosts/hostfile", SSH, iface, as_root, names,
                  "python", "-c", "print('a b')")
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\0")[:-1]


@pytest.mark.parametrize("name", list(VERSIONS))
def test_the_launcher_tells_each_mpi_from_its_version_text(name):
    assert flavor(IMPLEMENTATION[name], VERSIONS[name]) == (0, name)


@pytest.mark.parametrize(("implementation", "found"), [("OpenMPI", "intelmpi"), ("MPICH", "openmpi5"),
                                                       ("IntelMPI", "mpich")])
def test_another_mpi_in_the_image_is_named_with_the_fix(implementation, found):
    code, message = flavor(implementation, VERSIONS[found])
    assert code == 1
    assert message.endswith(f"set spec.mpi.implementation: {IMPLEMENTATION[found]}"), message


def test_an_unknown_version_text_falls_back_to_what_the_spec_says():
    assert flavor("OpenMPI", "mpirun: some wrapper") == (0, "openmpi4")
    assert flavor("MPICH", "") == (0, "mpich")


def test_open_mpi_4_gets_ortes_options_and_keeps_full_host_names():
    argv = command("openmpi4")
    assert argv[:10] == ["mpirun", "-np", "4", "--hostfile", "/etc/kubetrain/hosts/hostfile", "--bind-to", "none",
                         "--map-by", "slot", "--tag-output"]
    assert argv[argv.index("plm_rsh_args") + 1] == SSH
    assert "orte_keep_fqdn_hostnames" in argv and "plm_rsh_no_tree_spawn" in argv and "--prtemca" not in argv
    assert argv[-7:] == ["-x", "PATH", "-x", "KUBETRAIN_JOB_NAME", "python", "-c", "print('a b')"]


@pytest.mark.parametrize(("name", "tag"), [("openmpi4", "--tag-output"), ("openmpi5", "--tag-output"),
                                           ("mpich", "-l"), ("intelmpi", "-l")])
def test_every_mpi_tags_each_line_with_the_rank_that_printed_it(name, tag):
    """`[1,0]<stdout>:` (Open MPI) or `[0] ` (Hydra) before each rank's output, as horovodrun tags it: the log says
    who printed what, and the launcher's failure report keeps each rank's last lines."""
    argv = command(name)
    assert tag in argv[:argv.index("python")], argv


def test_open_mpi_5_gets_prrtes_options_and_no_orte_names():
    argv = command("openmpi5", as_root="1")
    assert argv[:2] == ["mpirun", "--allow-run-as-root"]
    assert argv[argv.index("plm_ssh_args") + 1] == SSH
    assert "plm_ssh_no_tree_spawn" in argv
    assert not [word for word in argv if "orte" in word or "rsh" in word or "keep_fqdn" in word], argv
    assert argv[-7:] == ["-x", "PATH", "-x", "KUBETRAIN_JOB_NAME", "python", "-c", "print('a b')"]


def test_mpich_gets_its_ssh_options_through_the_environment_and_a_list_of_variables():
    argv = command("mpich")
    assert argv[:2] == ["env", f"HYDRA_LAUNCHER_EXTRA_ARGS={SSH}"]
    assert argv[2:] == ["mpiexec", "-launcher", "ssh", "-f", "/etc/kubetrain/hosts/hostfile", "-n", "4", "-l",
                        "-iface", "eth0", "-genvlist", "PATH,KUBETRAIN_JOB_NAME", "python", "-c", "print('a b')"]


def test_intel_mpi_gets_bootstrap_options_and_a_machinefile():
    argv = command("intelmpi", as_root="1", iface="")  # no --allow-run-as-root: Intel's mpirun refuses it
    assert argv == ["mpirun", "-bootstrap", "ssh", "-bootstrap-exec-args", SSH, "-machinefile",
                    "/etc/kubetrain/hosts/hostfile", "-n", "4", "-l", "-genvlist", "PATH,KUBETRAIN_JOB_NAME",
                    "python", "-c", "print('a b')"]


@pytest.mark.parametrize(("implementation", "lines"), [
    ("OpenMPI", ["t-launcher slots=2", "t-worker-0.t.ns.svc slots=2", "t-worker-1.t.ns.svc slots=2"]),
    ("MPICH", ["t-launcher:2", "t-worker-0.t.ns.svc:2", "t-worker-1.t.ns.svc:2"]),
    ("IntelMPI", ["t-launcher:2", "t-worker-0.t.ns.svc:2", "t-worker-1.t.ns.svc:2"]),
])
def test_hostfile_has_each_mpis_format_and_the_launcher_first_when_it_runs_ranks(implementation, lines):
    body = named(training(workers=2, slotsPerWorker=2, resources={}, mpi={"implementation": implementation}))
    assert build_hosts_configmap(parse_job(body))["data"]["hostfile"].splitlines() == lines[1:]
    body["spec"]["launcher"] = {"runAsWorker": True}
    job = parse_job(body)
    assert build_hosts_configmap(job)["data"]["hostfile"].splitlines() == lines
    assert job.spec.num_processes == 6


def test_launcher_that_runs_ranks_gets_the_workers_resources_volumes_and_token():
    body = named(training(workers=0, resources={"gpusPerWorker": 2, "cpu": "4"}, data={"claimName": "d"}))
    body["spec"]["launcher"] = {"runAsWorker": True}
    spec = build_launcher_job(parse_job(body))["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "4"}, "limits": {"cpu": "4", "nvidia.com/gpu": 2}}
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/data", "/checkpoints", "/dev/shm"}
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in container["env"]}
    assert spec["automountServiceAccountToken"] is True and spec["hostname"] == "t-launcher"
