"""The worker and launcher entrypoints across hosts: ssh set up from the operator's Secret, hostfile and environment."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from kubetrain.contract import SSH_DIR
from kubetrain.keys import generate_ssh_keypair
from kubetrain.manifests.names import worker_hostname
from tests.support.job_on_hosts import job_body

pytestmark = pytest.mark.launch

REPORT = [
    "sh",
    "-c",
    'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE on $(hostname) uid $(id -u) '
    'job $KUBETRAIN_JOB_NAME checkpoints $KUBETRAIN_CHECKPOINT_DIR greeting $GREETING horovod $HOROVOD_CHECK"',
]


def printed(output: str) -> list[str]:
    """What the ranks printed, without the tag mpirun puts before each rank's line (`[1,0]<stdout>:`)."""
    return re.findall(r"^\[\d+,\d+\]<stdout>:(.*)$", output, re.MULTILINE)


def ranks(output: str) -> set[str]:
    return {line.split(" uid ")[0] for line in printed(output) if line.startswith("rank ")}


IMAGE_USER = "kubetrain:x:1000:1000:kubetrain:/home/kubetrain:/bin/bash"
ARBITRARY_UID = {"spec": {"securityContext": {"runAsUser": 4242, "runAsGroup": 0, "fsGroup": 0}}}


NSS_WRAPPER = next(iter(glob.glob("/usr/lib/*/libnss_wrapper.so")), None)


@pytest.mark.parametrize(
    ("user", "pod_template", "uid"),
    [
        ("root", None, "0"),
        ("image user", None, "1000"),
        ("arbitrary uid, gid 0", ARBITRARY_UID, "4242"),
        pytest.param("arbitrary uid, read-only passwd", ARBITRARY_UID, "4242",
                     marks=pytest.mark.skipif(not NSS_WRAPPER, reason="libnss-wrapper is not installed")),
    ],
)
def test_launcher_runs_one_rank_on_each_worker(deploy, user, pod_template, uid):
    """As root, as the pods' uid 1000, and as an uid the image does not know (OpenShift-style, group 0): the image's
    /etc/passwd is writable by group 0, or read-only (readOnlyRootFilesystem) and nss_wrapper serves the uid."""
    body = job_body("hello", REPORT, pod_template=pod_template, env=[{"name": "GREETING", "value": "hi"}])
    cluster = deploy(body, as_pod_user=user != "root")
    if user != "root":
        cluster.network.install_passwd([IMAGE_USER], writable_by_root_group="read-only" not in user)
    for index in range(2):
        cluster.start_worker(index).wait_for_log("Server listening on 0.0.0.0 port 2222")
    # HOROVOD_* set only in the launcher reaches the ranks through mpirun -x, like spec.env and the contract
    launcher = cluster.start_launcher(extra_env={"HOROVOD_CHECK": "forwarded"})
    assert launcher.wait(timeout=60) == 0, launcher.log()
    output = launcher.log()
    # --map-by slot fills the hostfile in order: rank 0 on worker 0
    assert ranks(output) == {"rank 0 of 2 on hello-worker-0", "rank 1 of 2 on hello-worker-1"}, output
    for line in (line for line in printed(output) if line.startswith("rank ")):
        assert line.endswith(f" uid {uid} job hello checkpoints {cluster.checkpoint_dir} greeting hi horovod forwarded")
    for worker in cluster.workers.values():
        assert re.search(r"Accepted publickey for \S+ from " + re.escape(cluster.launcher_host.address), worker.log())
        assert f"as uid {uid}" in worker.log()
        if "read-only" in user:
            assert "through nss_wrapper" in worker.log()


OWN_VALUES = [
    "sh", "-c",
    'echo "rank $OMPI_COMM_WORLD_RANK pod $POD_NAME ip $POD_IP token $(printf %s "$TOKEN" | sha256sum | cut -c1-16)";'
    " sleep 2",
]


TOKEN = "s3cr3t 'quoted' \"double\" \\ back\nsecond line"
OWN_ENV = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}]
API_SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api"}, "stringData": {"token": TOKEN}}


def command_lines_holding(secret: bytes, launcher) -> set[str]:
    """Until the launcher exits: the command line of every process of every host (they share this pid namespace)
    that holds `secret`."""
    holders = set()
    while launcher.process.poll() is None:
        for path in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                text = Path(path).read_bytes()
            except OSError:
                continue
            if secret in text:
                holders.add(text.replace(b"\0", b" ").decode(errors="replace")[:300])
        time.sleep(0.1)
    return holders


def test_each_rank_sees_its_own_pods_values_and_no_command_line_holds_a_secret(deploy):
    """env from a fieldRef is resolved per pod: each rank sees its own pod's, not the launcher's. A secretKeyRef's
    value (here with quotes and a newline, which sshd's SetEnv cannot carry) reaches every rank, and no process on
    any host has it on its command line."""
    cluster = deploy(job_body("own", OWN_VALUES, env=OWN_ENV), secrets=[API_SECRET])
    for index in range(2):
        cluster.start_worker(index).wait_for_log("Server listening on 0.0.0.0 port 2222")
    launcher = cluster.start_launcher()
    holders = command_lines_holding(b"s3cr3t", launcher)
    assert launcher.wait(timeout=60) == 0, launcher.log()
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
    lines = sorted(line for line in printed(launcher.log()) if line.startswith("rank "))
    assert lines == [f"rank {i} pod own-worker-{i} ip {cluster.worker_hosts[i].address} token {digest}"
                     for i in range(2)], launcher.log()
    assert not holders, f"a secret on a command line: {holders}"


ELASTIC_VALUES = [
    "sh", "-c",
    'echo "rank $HOROVOD_RANK pod $POD_NAME token $(printf %s "$TOKEN" | sha256sum | cut -c1-16)"; sleep 2',
]


def test_elastic_ranks_see_their_own_pods_values_and_horovodrun_holds_no_secret(deploy, scratch):
    """horovodrun writes the environment it forwards into each rank's ssh command: the job's secretKeyRef and
    fieldRef values stay out of it, and each rank, on the launcher (runAsWorker) or a worker, gets its own pod's."""
    body = job_body("flex", ELASTIC_VALUES, workers=1, env=OWN_ENV)
    body["spec"]["elastic"] = {"minWorkers": 1, "maxWorkers": 1}
    body["spec"]["launcher"]["runAsWorker"] = True
    cluster = deploy(body, secrets=[API_SECRET])
    # root's home is this test's (horovodrun's ssh reads ~/.ssh/config, which the launcher writes)
    root_home = scratch / "root-home"
    root_home.mkdir()
    cluster.network.install_passwd([f"root:x:0:0:root:{root_home}:/bin/bash"])
    worker = cluster.worker_hosts[0]
    worker.names = (*worker.names, "flex-ready.team.svc")  # the Service of Ready workers, for the discovery
    cluster.network.write_hosts_files()
    cluster.start_worker(0).wait_for_log("Server listening on 0.0.0.0 port 2222")
    launcher = cluster.start_launcher()
    holders = command_lines_holding(b"s3cr3t", launcher)
    assert launcher.wait(timeout=120) == 0, launcher.log()
    assert not holders, f"a secret on a command line: {holders}"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
    # horovodrun prefixes each rank's lines with [rank]<stdout>:; elastic Horovod orders its hosts as it finds
    # them, so either pod may be rank 0
    found = dict(re.findall(r"<stdout>:rank (\d+) (pod .*)$", launcher.log(), re.MULTILINE))
    assert sorted(found) == ["0", "1"], launcher.log()
    assert sorted(found.values()) == [f"pod flex-launcher token {digest}", f"pod flex-worker-0 token {digest}"], \
        launcher.log()


def test_launcher_waits_for_a_worker_whose_name_and_sshd_come_late(deploy):
    """DNS not resolving yet and sshd not listening yet are both retried within the bound."""
    cluster = deploy(job_body("late", REPORT, wait_seconds=60))
    late = cluster.worker_hosts[1]
    cluster.network.hide(late)
    cluster.start_worker(0).wait_for_log("Server listening")
    launcher = cluster.start_launcher()
    launcher.wait_for_log("waiting up to 60s")
    time.sleep(3)
    assert launcher.process.poll() is None, launcher.log()
    cluster.network.reveal(late)
    time.sleep(2)
    cluster.start_worker(1)
    assert launcher.wait(timeout=60) == 0, launcher.log()
    assert len(ranks(launcher.log())) == 2, launcher.log()
    assert f"worker {worker_hostname(cluster.job, 1)} accepts ssh" in launcher.log()


def test_worker_that_never_starts_fails_the_launcher_within_the_bound(deploy):
    cluster = deploy(job_body("lonely", REPORT, wait_seconds=6))
    cluster.start_worker(0).wait_for_log("Server listening")
    started = time.monotonic()
    launcher = cluster.start_launcher()
    code = launcher.wait(timeout=30)
    elapsed = time.monotonic() - started
    output = launcher.log()
    assert code == 3, output
    assert elapsed < 6 + 6, f"took {elapsed:.1f}s for a 6s bound"
    missing, present = worker_hostname(cluster.job, 1), worker_hostname(cluster.job, 0)
    assert f"worker {missing} did not accept ssh on port 2222 within 6s" in output
    assert "Connection refused" in output
    assert f"giving up on worker(s) {missing} after 6s" in output
    assert f"worker {present} accepts ssh" in output and "rank " not in output


def test_launcher_finds_every_one_of_many_workers(deploy, scratch):
    """160 names in the hostfile (five times the checks the launcher runs at once), spread over 8 hosts, each a
    worker's sshd. The launcher checks every name for ssh and starts the MPI; it is stopped there, as 160 ranks prove
    nothing more. The benchmark (tests/bench/host_check.py) times 1,000, the API's most."""
    cluster = deploy(job_body("wide", REPORT, workers=160, wait_seconds=300), worker_hosts=8)
    cluster.give_root_a_home(scratch / "root-home")
    cluster.start_workers()
    launcher = cluster.start_launcher()
    try:
        launcher.wait_for_log("all hosts ready", timeout=300)
    finally:
        cluster.network.kill_host(launcher.host)
    accepted = re.findall(r"^kubetrain launcher: worker (\S+) accepts ssh$", launcher.log(), re.MULTILINE)
    expected = [worker_hostname(cluster.job, i) for i in range(cluster.job.spec.workers)]
    assert sorted(accepted) == sorted(expected), launcher.log()[-3000:]


def test_one_worker_among_many_that_never_answers_is_named_when_the_launcher_gives_up(deploy, scratch):
    """Worker 13 of 16 never gets a DNS name (its pod never started): the timeout names it, and only it. A 10 s bound
    gives each login the launcher's longest ssh timeout (15 s), which a busy machine needs."""
    cluster = deploy(job_body("gap", REPORT, workers=16, wait_seconds=10), worker_hosts=2)
    cluster.give_root_a_home(scratch / "root-home")
    missing = worker_hostname(cluster.job, 13)
    carrier = next(host for host in cluster.worker_hosts if missing in host.names)
    carrier.names = tuple(name for name in carrier.names if name != missing)
    cluster.network.write_hosts_files()
    cluster.start_workers()
    launcher = cluster.start_launcher()
    code = launcher.wait(timeout=60)
    output = launcher.log()
    assert code == 3, output
    assert f"giving up on worker(s) {missing} after 10s (launcher.waitForWorkersSeconds)" in output, output
    assert f"worker {missing} did not accept ssh on port 2222 within 10s: " in output, output
    assert f"Could not resolve hostname {missing}" in output, output
    assert output.count(" accepts ssh") == 15, output


def test_a_worker_holds_no_private_key_and_one_without_the_jobs_host_key_is_refused(deploy):
    """Worker 1 answers with another host key (what a pod that does not hold the job's Secret would do): the
    launcher's ssh refuses it, as known_hosts pins the job's host key, and no rank runs there."""
    cluster = deploy(job_body("pinned", REPORT, wait_seconds=6))
    cluster.start_worker(0).wait_for_log("Server listening")
    secret = cluster.kubelet.objects[("Secret", "pinned-ssh")]
    secret["stringData"] = {**secret["stringData"], "ssh_host_ed25519_key": generate_ssh_keypair().private_key}
    cluster.start_worker(1).wait_for_log("Server listening")
    for worker in cluster.workers.values():
        mounted = sorted(p.name for p in worker.mounts[SSH_DIR].iterdir() if not p.name.startswith(".."))
        assert mounted == ["authorized_keys", "ssh_host_ed25519_key"], mounted
    launcher = cluster.start_launcher()
    code = launcher.wait(timeout=30)
    output = launcher.log()
    assert code == 3, output
    impostor, pinned = worker_hostname(cluster.job, 1), worker_hostname(cluster.job, 0)
    assert f"worker {pinned} accepts ssh" in output, output
    assert f"worker {impostor} did not accept ssh on port 2222 within 6s" in output, output
    assert "Host key verification failed" in output and "rank " not in output, output


ENTRYPOINTS = Path(__file__).resolve().parents[2] / "images" / "entrypoints"


def run_entrypoint(name: str, args: list[str], env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ["PATH"], "HOME": str(home), **env}
    return subprocess.run([str(ENTRYPOINTS / name), *args], env=environment, capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize(
    ("name", "args", "env", "message"),
    [
        ("launcher", [], {}, "usage: launcher <command...>"),
        ("launcher", ["true"], {"KUBETRAIN_HOSTFILE": "/nonexistent/hostfile"},
         "KUBETRAIN_HOSTFILE=/nonexistent/hostfile is missing (the job's <name>-hosts ConfigMap is not mounted)"),
        ("launcher", ["true"], {"KUBETRAIN_NUM_PROCESSES": "two"}, "KUBETRAIN_NUM_PROCESSES='two' must be a positive"),
        ("launcher", ["true"], {"KUBETRAIN_WAIT_SECONDS": "soon"}, "KUBETRAIN_WAIT_SECONDS='soon' must be a whole"),
        ("launcher", ["true"], {"KUBETRAIN_SSH_CHECKS": "0"}, "KUBETRAIN_SSH_CHECKS='0' must be a positive integer"),
        ("launcher", ["true"], {"KUBETRAIN_SSH_DIR": "/nonexistent/ssh"},
         "KUBETRAIN_SSH_DIR=/nonexistent/ssh does not exist (the job's <name>-ssh Secret is not mounted)"),
        ("launcher", ["true"], {"DROP_KEY": "id_ed25519"}, "/id_ed25519 is missing or unreadable by uid 0"),
        ("worker", [], {"KUBETRAIN_SSH_DIR": "/nonexistent/ssh"}, "KUBETRAIN_SSH_DIR=/nonexistent/ssh does not exist"),
        ("worker", [], {"DROP_KEY": "authorized_keys"}, "/authorized_keys is missing or unreadable by uid 0"),
    ],
)
def test_entrypoints_reject_a_broken_pod_configuration_with_exit_code_2(tmp_path, name, args, env, message):
    """What a user sees in `kubectl logs` when the pod lacks what the entrypoint needs; no sshd or ssh is started."""
    ssh = tmp_path / "ssh"
    ssh.mkdir()
    for key in ("id_ed25519", "id_ed25519.pub", "authorized_keys", "ssh_config"):
        if key != env.get("DROP_KEY"):
            (ssh / key).write_text("placeholder\n")
    (tmp_path / "hostfile").write_text("demo-worker-0.demo.team.svc slots=1\n")
    contract = {"KUBETRAIN_SSH_DIR": str(ssh), "KUBETRAIN_HOSTFILE": str(tmp_path / "hostfile"),
                "KUBETRAIN_NUM_PROCESSES": "1", "KUBETRAIN_WAIT_SECONDS": "1"}
    env = {k: v for k, v in env.items() if k != "DROP_KEY"}
    result = run_entrypoint(name, args, {**contract, **env}, tmp_path / "home")
    assert result.returncode == 2, result.stderr
    assert f"kubetrain {name}: error: " in result.stderr and message in result.stderr, result.stderr
