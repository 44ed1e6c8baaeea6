"""The user's path on a kind cluster, one test per scenario, in this order: the README's kind quick start run as
written (cluster, registry, images pushed, chart, volumes, a cifar_mixup job to Succeeded, its curve), a user's own
image followed by `kubetrain wait`, a restart after a lost worker driven by the Python client with `kubetrain logs` of
both its attempts, an elastic job whose TensorBoard is opened with `kubetrain tensorboard` (and the README's
screenshots) and which then loses a worker and grows by `kubectl scale` without restarting, a rank that fails, the
time to the first step beside mpi-operator (the kind benchmark at its small size), a missing image, delete, upgrade,
uninstall.

Every test runs on the quick start's cluster (conftest.py), so `-k restart` runs the quick start first. The cluster is
made from the kind and node image tests/e2e/kind-node/build.sh made on this machine (`make test` builds them), else
from kind on PATH with its default node image; what this machine changes in the quick start, and the settings
(KUBETRAIN_E2E_*, KUBETRAIN_KIND_*), are in tests/support/kind_cluster.py. Skipped, with the reason, only where
Docker or kind cannot run."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

import pytest

from kubetrain.children import CHILD_KINDS
from kubetrain.client import Client, Job
from kubetrain.contract import LABEL_JOB, ROLE_LAUNCHER, launcher_name, worker_name
from kubetrain.reasons import FAILED, IMAGE_PULL_FAILED, PENDING, RESTARTING, RUNNING, STARTING, SUCCEEDED
from tests.bench import first_step, first_step_kind
from tests.bench.first_step_kind import FirstStepBench
from tests.bench.report import format_text, write_results
from tests.e2e.conftest import QuickStart
from tests.support import screenshots
from tests.support.documented import REPO, section_commands
from tests.support.kind_cluster import (
    CRD,
    CURVE,
    JOB_IMAGE,
    LOG,
    NAMESPACE,
    OWN_IMAGE,
    REGISTRY,
    RELEASE,
    SYSTEM_NAMESPACE,
    KindCluster,
    poll,
)
from tests.support.kind_jobs import Jobs, field
from tests.support.kind_manifests import (
    CHECKPOINT_MOUNT,
    QUICK_START_JOB,
    cifar_mixup,
    elastic,
    own_image,
    read_checkpoints,
    trained_epochs,
    with_tensorboard,
)
from tests.support.programs import TAG

# The quick start builds what is missing, creates the cluster and pushes the images.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * 3600)]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli"]
# Held-out accuracy the cifar_mixup job must pass on the digits (chance: 0.1); 6 epochs on 2 ranks reach about 0.7.
LEARNED = 0.3
RANKS_TRAIN_FROM = re.compile(r"(\d+) ranks train from epoch (\d+), step (\d+)")
# Each rank says it is up; rank 1 then prints a traceback on stderr, as Python does, and exits 3.
FAILING_RANK_LINES = ["Traceback (most recent call last):", "ValueError: rank 1 gives up"]
FAILING_RANK = ["sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK up"; if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 2; '
                f'printf "{FAILING_RANK_LINES[0]}\\n{FAILING_RANK_LINES[1]}\\n" >&2; exit 3; fi; sleep 300']
# The charts of the README's TensorBoard screenshot (a regular expression of tags).
TENSORBOARD_TAGS = urllib.parse.quote("epoch/(loss|val_accuracy)", safe="")
# Fewer colours than this is a blank page or terminal (drawn text alone brings dozens of shades).
SCREENSHOT_COLOURS = 20


def test_quick_start(quick_start: QuickStart, kind: KindCluster) -> None:
    """The README's quick start, every command as written: the chart's operator pulled from the local registry and
    Ready, the digits prepared, the job exactly Pending -> Starting -> Running -> Succeeded with every epoch, a metric
    and the last epoch's checkpoint (in `kubectl get dtr` and the status), its checkpoint and history.json on the
    checkpoint volume, and its curve copied out as a PNG."""
    name, epochs = QUICK_START_JOB["metadata"]["name"], trained_epochs(QUICK_START_JOB)
    assert kind.crd_established() and kind.operator_pods_ready()
    operator = kind.kubectl("get", "deployment", RELEASE, "--namespace", SYSTEM_NAMESPACE,
                            "--output=jsonpath={.spec.template.spec.containers[0].image}")
    assert operator.startswith(f"{REGISTRY}/"), f"the operator runs {operator}, not an image of the registry"
    table = next(output for command, output in quick_start.outputs.items() if command.startswith("kubectl get dtr"))
    LOG.info("kubectl get dtr printed:\n%s", table)
    assert quick_start.recorder.phases(name) == [PENDING, STARTING, RUNNING, SUCCEEDED]
    jobs = Jobs(kind, quick_start.recorder)
    checkpoint = assert_finished(jobs, name, epochs, table)
    folder = f"{CHECKPOINT_MOUNT}/{NAMESPACE}/{name}"
    found = json.loads(kind.run_job(read_checkpoints(JOB_IMAGE, folder, checkpoint)).splitlines()[-1])
    assert found["checkpoint"], f"{checkpoint} is not on the checkpoint volume; {folder} holds {found['files']}"
    assert found["epochs"] == list(range(1, epochs + 1)), f"history.json has epochs {found['epochs']}"
    curve = CURVE.read_bytes() if CURVE.exists() else b""
    assert curve.startswith(PNG_SIGNATURE), f"the quick start's kubectl cp left no PNG at {CURVE}"
    (kind.settings.artifacts / CURVE.name).write_bytes(curve)


def test_own_image(jobs: Jobs, installed: KindCluster) -> None:
    """A user's own image (tests/images/byo: MPICH from PyPI, not FROM kubetrain/base, no uid 1000 in it): one worker
    and the launcher as a second rank run an mpi4py allreduce across both pods, rank 0 on the launcher. `kubetrain
    wait` follows it and exits 0 when it has Succeeded."""
    name = "own-image"
    jobs.apply(own_image(name, installed.push(OWN_IMAGE)))
    waited = kubetrain_wait(jobs, name)
    assert (waited.returncode, waited.stdout.split(":")[0]) == (0, f"{NAMESPACE}/{name} Succeeded"), \
        f"kubetrain wait exited {waited.returncode}: {waited.stdout}{waited.stderr}"
    log = jobs.launcher_log(name, "--timestamps")
    expected = f"allreduce ok: size=2 sum=3 rank0={launcher_name(name)} implementation=MPICH"
    assert expected in log, f"the launcher's log does not show the 2-rank allreduce with rank 0 on the launcher:\n{log}"


def test_restart_and_the_logs_of_both_attempts(jobs: Jobs, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker pod deleted once an epoch is done: the job shows Restarting and `restarts: 1`, the new attempt
    resumes from a checkpoint of epoch 1 or later, then it succeeds with every epoch. The Python client creates the
    job, waits for it (its changes show the restart) and reads every epoch's metrics back.

    `kubetrain logs NAME -f`, started while the first attempt runs, prints its output, goes on with the second
    attempt's, and exits 0 when the job has Succeeded. Then `--attempt 0` still prints the first attempt's output,
    kept by the operator after its pods went; without `--attempt`, the second's; `--rank 0` only rank 0's lines."""
    name, epochs = "cifar-mixup-restart", jobs.cluster.settings.epochs + 1
    monkeypatch.setenv("KUBECONFIG", str(jobs.cluster.kubeconfig))
    client = Client(NAMESPACE)
    client.create(cifar_mixup(name, epochs))
    jobs.names.append(name)  # its objects are dumped if the test fails
    jobs.wait_for_phase(name, RUNNING)
    following = subprocess.Popen([*KUBETRAIN, "logs", name, "-n", NAMESPACE, "-f"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=jobs.cluster.env())
    try:
        delete_worker_after_an_epoch(jobs, name)
        changes: list[Job] = []
        final = client.wait(name, timeout=jobs.cluster.settings.timeout, on_change=changes.append)
        followed, said = following.communicate(timeout=300)
    finally:
        following.kill()  # still running only when the test failed
    assert RESTARTING in jobs.phases(name), f"{name} never showed Restarting: {jobs.phases(name)}"
    assert RESTARTING in [job.phase for job in changes], f"Client.wait's changes: {changes}"
    assert (final.phase, final.restarts) == (SUCCEEDED, 1), f"Client.wait returned {final}"
    status = jobs.status(name)
    history = client.history(name)
    assert [row["epoch"] for row in history] == list(range(1, epochs + 1)), f"Client.history gave {history}"
    assert history[-1]["val_accuracy"] == field(status, "progress.metrics")["val_accuracy"], history[-1]
    launcher, log = jobs.newest_launcher_log(name)
    restored = re.search(r"restored .* \(epoch (\d+)", log)
    assert restored and int(restored.group(1)) >= 1, \
        f"the new attempt's launcher {launcher} did not log a resume from epoch 1 or later:\n{log}"
    LOG.info("phases %s; the new attempt logged: %s", jobs.phases(name), restored.group(0))
    assert_finished(jobs, name, epochs)

    assert following.returncode == 0, f"kubetrain logs -f exited {following.returncode}: {said}"
    assert f"kubetrain: attempt 1 of {NAMESPACE}/{name} follows" in said.splitlines(), said
    first = kubetrain_logs(jobs, name, "--attempt", "0")
    assert "training starts at epoch 1 " in first.stdout and "saved checkpoint" in first.stdout, first.stdout
    assert not re.search(r"restored .* \(epoch", first.stdout), "attempt 0 resumed from nothing"
    second = kubetrain_logs(jobs, name)
    assert re.search(r"restored .* \(epoch [1-9]", second.stdout), second.stdout
    LOG.info("attempt 0 printed %d lines, attempt 1 %d; kubetrain logs -f %d", first.stdout.count("\n"),
             second.stdout.count("\n"), followed.count("\n"))
    # -f printed the first attempt's output, then the second's. It may have more of the first than the kept copy:
    # mpirun's last lines, written between the operator's copy and the restart's deletion of the launcher.
    lines, kept, current = followed.splitlines(), first.stdout.splitlines(), second.stdout.splitlines()
    if not first.stderr:  # no note: the copy holds the first attempt's output from its first line
        assert lines[:len(kept)] == kept, "kubetrain logs -f did not start with the first attempt's output"
    assert lines[len(lines) - len(current):] == current, "kubetrain logs -f did not end with the second attempt's"

    rank0 = kubetrain_logs(jobs, name, "--rank", "0").stdout.splitlines()
    assert rank0 and all(line.startswith("[1,0]<std") for line in rank0), rank0[:5]
    assert any("restored " in line for line in rank0) and len(rank0) < len(current), "--rank 0 kept rank 0's lines"


def test_elastic_and_its_tensorboard(jobs: Jobs, installed: KindCluster) -> None:
    """An elastic job of 2 workers (1 to 3) with spec.tensorboard. While it trains, TensorBoard answers through
    `kubetrain tensorboard` (see `check_tensorboard`). Then it loses a worker pod, and `kubectl scale` makes it 3. It
    never restarts: it goes on with 1 rank from no earlier than the epoch it had reported, the replacement and the
    third worker join the running training, and one launcher pod does it all."""
    name = "cifar-mixup-elastic"
    # Long enough to scale: in CI (2026-11-28) the TensorBoard check and screenshots ran while epochs 2 to 13 trained,
    # the loss came in epoch 14 and the third worker trained from epoch 16.
    jobs.apply(with_tensorboard(elastic(cifar_mixup(name, 26), min_workers=1, max_workers=3)))
    check_tensorboard(jobs, installed, name)
    epoch = delete_worker_after_an_epoch(jobs, name)
    replacement = worker_name(name, 1)
    jobs.wait_for_status(name, "workers.lastJoined", f"{replacement} at ")
    ready_at = ready_since(jobs.cluster.get("pod", replacement))
    status = jobs.status(name)
    LOG.info("left: %s; joined: %s; Ready at %s", field(status, "workers.lastLeft"),
             field(status, "workers.lastJoined"), ready_at)
    assert status.get("phase") == RUNNING, f"{name} is {status.get('phase')} after losing a worker, not Running"
    jobs.wait_for_launcher_log(name, "1 ranks train from", 1)
    jobs.wait_for_launcher_log(name, "2 ranks train from", 2)  # the first start, then again with the replacement
    jobs.cluster.kubectl("scale", "distributedtraining", name, "--namespace", NAMESPACE, "--replicas", "3")
    jobs.wait_for_status(name, "workers.lastJoined", f"{worker_name(name, 2)} at ")
    jobs.wait_for_launcher_log(name, "3 ranks train from", 1)
    status = jobs.wait_for_phase(name, SUCCEEDED)

    assert RESTARTING not in jobs.phases(name), f"{name} restarted: {jobs.phases(name)}"
    assert status.get("restarts") == 0, f"{name} has status.restarts={status.get('restarts')}, expected 0"
    assert_started(status)  # the start of the first workers, whatever joined and left since
    launchers = [pod["metadata"]["name"] for pod in jobs.pods(name, ROLE_LAUNCHER)]
    assert len(launchers) == 1, f"{name} had launcher pods {launchers}, expected the one"
    log = jobs.launcher_log(name, "--timestamps")
    (jobs.cluster.settings.artifacts / f"{name}-launcher.log").write_text(log)
    starts = [(int(ranks), int(start)) for ranks, start, _ in RANKS_TRAIN_FROM.findall(log)]
    LOG.info("the launcher's training (re)starts (ranks, epoch): %s", starts)
    # The launcher may start on the first Ready worker (elastic.minWorkers 1) before the second joins: the loss came
    # after the first start on 2 ranks.
    first_pair = next((i for i, (ranks, _) in enumerate(starts) if ranks == 2), len(starts))
    after_loss = [start for ranks, start in starts[first_pair + 1:] if ranks == 1]
    assert after_loss, f"{name} never went on with 1 rank: {starts}"
    assert any(ranks == 3 for ranks, _ in starts), f"{name} never trained with 3 ranks: {starts}"
    assert min(after_loss) >= epoch, f"{name} went back before epoch {epoch} after the loss: {starts}"
    LOG.info("the replacement trained %s s after it was Ready", seconds_to_train_again(log, ready_at))


def check_tensorboard(jobs: Jobs, installed: KindCluster, name: str) -> None:
    """A job with spec.tensorboard, once it has reported 2 epochs: its worker 0 has the tensorboard container,
    `kubetrain tensorboard NAME --port P` prints the URL, and TensorBoard's HTTP API answers through it while the job
    trains: the run's tags, and the epoch's val_accuracy the status reports. Then the README's screenshots:
    TensorBoard's curves in headless chromium and `kubetrain status --watch` in an xterm. Ctrl-C ends the forward
    (exit 130)."""
    # two epochs: the learning rate is written every 50 steps, and an epoch of the digits has about 45
    jobs.wait_for(name, "2 reported epochs", lambda status: True if (field(status, "progress.epoch") or 0) >= 2
                  else None)
    pod = installed.get("pod", worker_name(name, 0))
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["kubetrain-entrypoints", "tensorboard"], \
        f"{worker_name(name, 0)} has no tensorboard container: {pod['spec']['initContainers']}"
    port = free_port()
    # Ctrl-C reaches it as at a terminal: a test run in the background may have SIGINT ignored, and children
    # inherit that.
    forward = subprocess.Popen([sys.executable, "-m", "kubetrain.cli", "tensorboard", name, "--namespace",
                                NAMESPACE, "--port", str(port)], env=installed.env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        LOG.info("kubetrain tensorboard printed: %s", line.strip())
        url = f"http://127.0.0.1:{port}/"
        assert line.endswith(f"{url}  (Ctrl-C stops)\n"), f"kubetrain tensorboard printed {line!r}"
        tags = read_json(f"{url}data/plugin/scalars/tags")
        assert {"epoch/loss", "epoch/val_accuracy", "step/learning_rate"} <= set(tags.get("tensorboard", {})), tags
        status = jobs.status(name)
        assert status.get("phase") == RUNNING, f"{name} is {status.get('phase')}: TensorBoard was read too late"
        reported = field(status, "progress.epoch")
        accuracy = field(status, "progress.metrics")["val_accuracy"]
        query = urllib.parse.urlencode({"run": "tensorboard", "tag": "epoch/val_accuracy"})

        def shown() -> dict[int, float] | None:  # TensorBoard reads the files again every 5 s
            found = {step: value for _, step, value in read_json(f"{url}data/plugin/scalars/scalars?{query}")}
            return found if reported in found else None

        points = poll(shown, 60, f"TensorBoard to show epoch {reported}", lambda: "it shows fewer epochs")
        LOG.info("epoch %d reported; TensorBoard's val_accuracy by epoch: %s", reported, points)
        assert points.get(reported) == pytest.approx(accuracy, rel=1e-6), \
            f"TensorBoard shows val_accuracy {points} where the status reports {accuracy} at epoch {reported}"
        take_screenshots(jobs, name, url)
    finally:
        forward.send_signal(signal.SIGINT)
        _, stderr = forward.communicate(timeout=30)
    assert forward.returncode == 130, f"kubetrain tensorboard exited {forward.returncode} on Ctrl-C: {stderr}"


def take_screenshots(jobs: Jobs, name: str, url: str) -> None:
    """The README's pictures of a running job, into the artifacts directory: `kubetrain status NAME --watch` in an
    xterm once it has seen two more progress reports (its bar then shows an ETA), and the curves in TensorBoard (at
    `url`) in headless chromium. Neither may be blank."""
    missing = screenshots.missing_tools()
    assert not missing, f"the screenshots need {missing}, which .ci/setup installs"
    folder = jobs.cluster.settings.artifacts
    with screenshots.terminal([*KUBETRAIN, "status", name, "-n", NAMESPACE, "--watch"], jobs.cluster.env(),
                              f"kubetrain status {name} --watch", columns=112, rows=18) as capture:
        reported = field(jobs.status(name), "progress.epoch") or 0
        for _ in range(2):  # the bar's ETA is the pace between the reports the watch saw
            reported = jobs.wait_for(name, f"a report after epoch {reported}", lambda status, after=reported:
                                     epoch if (epoch := field(status, "progress.epoch") or 0) > after else None)
        time.sleep(2)  # the watch's line of the epoch, and TensorBoard's next read of the event files
        watch = capture(folder / "status-watch.png")
    board = screenshots.page(f"{url}?darkMode=false#scalars&tagFilter={TENSORBOARD_TAGS}&_smoothingWeight=0",
                             folder / "tensorboard.png")
    for shot in (board, watch):
        assert screenshots.colours(shot) >= SCREENSHOT_COLOURS, f"{shot} has {screenshots.colours(shot)} colours"
    LOG.info("screenshots for the README (docs/screenshots): %s, %s", board, watch)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_json(url: str) -> Any:
    """TensorBoard's answer at `url`, retried while it is still loading the event files."""

    def answer() -> Any:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                found = json.loads(response.read())
        except OSError:
            return None
        return found or None

    return poll(answer, 120, f"TensorBoard to answer at {url}", lambda: "no answer")


def test_a_failing_rank_is_named_in_the_status_and_kubetrain_wait_exits_1(jobs: Jobs, installed: KindCluster) -> None:
    """A job whose rank 1 exits 3 with a traceback (no restart allowed): `kubetrain wait` exits 1 saying Failed;
    status.failure names rank 1 (as Open MPI's summary does), its pod and node, exit code 3 and its last lines, and
    `kubectl describe` shows them."""
    name = "failing-rank"
    body = cifar_mixup(name, 1)
    body["spec"]["command"] = FAILING_RANK
    body["spec"]["runPolicy"] = {"backoffLimit": 0}
    jobs.apply(body)
    waited = kubetrain_wait(jobs, name)
    assert (waited.returncode, waited.stdout.split(":")[0]) == (1, f"{NAMESPACE}/{name} Failed"), \
        f"kubetrain wait exited {waited.returncode}: {waited.stdout}{waited.stderr}"
    failure = jobs.status(name).get("failure") or {}
    LOG.info("%s: status.failure %s", name, failure)
    nodes = installed.kubectl("get", "nodes", "--output=name").replace("node/", "").split()
    assert {key: failure.get(key) for key in ("attempt", "rank", "rankFrom", "pod", "exitCode")} == \
        {"attempt": 0, "rank": 1, "rankFrom": "MPI", "pod": worker_name(name, 1), "exitCode": 3}, failure
    assert failure.get("node") in nodes, f"status.failure.node {failure.get('node')} is none of {nodes}"
    assert failure.get("lastLines", [])[-2:] == FAILING_RANK_LINES, failure
    described = installed.kubectl("describe", "distributedtraining", name, "--namespace", NAMESPACE)
    assert FAILING_RANK_LINES[-1] in described and worker_name(name, 1) in described, described


def test_time_to_first_step_beside_mpi_operator(installed: KindCluster) -> None:
    """The kind benchmark at its small size (`python -m tests.bench.first_step_kind --size full` runs it in full): the
    quick start's job under kubetrain, the same job as an MPIJob under mpi-operator v0.8.0, and the floor each reach
    their first step, their phases come in order, and kubetrain's status.startup says what the pods and rank 0's log
    say; each controller's CPU, and the API server's and etcd's, are measured. The rows go to the artifacts directory;
    no time is asserted."""
    workdir = installed.settings.artifacts / "first-step"
    workdir.mkdir(exist_ok=True)
    bench = FirstStepBench(installed, QUICK_START_JOB, workdir)
    try:
        starts = bench.measure(first_step_kind.SIZES["small"])
    finally:
        bench.stop()
    table = first_step.rows(starts)
    write_results(workdir, table, {"size": "small", "command": "pytest tests/e2e -k time_to_first_step"})
    LOG.info("time to first step:\n%s", format_text(table))
    assert sorted(start.contender for start in starts) == sorted(first_step.CONTENDERS), starts
    for start in starts:
        expected = first_step.PHASES if start.contender != first_step.FLOOR else first_step.PHASES[-2:]
        assert list(start.seconds) == list(expected), f"{start.contender}: phases {start.seconds}"
        times = list(start.seconds.values())
        assert all(0 < a <= b + 1 for a, b in zip(times, times[1:], strict=False)), \
            f"{start.contender}: out of order {start}"
    kubetrain = next(start for start in starts if start.contender == first_step.KUBETRAIN)
    # Rank 0's times are its own clock's; a pod's are whole seconds, cut down, and the watch sees a container start
    # only after the kubelet's next status write (its relist runs every second).
    for phase, reported, late in (("first step", "FirstStep", 1.5), ("world up", "WorldUp", 1.5),
                                  ("launcher running", "LauncherStarted", 1 + 2.5)):
        behind = kubetrain.seconds[phase] - kubetrain.reported[reported]
        assert -1.5 < behind < late, f"status.startup's {reported} is not what was seen: {kubetrain}"
    for start in starts:  # both controllers, and the API server and etcd they share, did work the meter saw
        if start.contender != first_step.FLOOR:
            assert start.cpu.get("controller", 0) > 0 and start.cpu.get("API server and etcd", 0) > 0, start
    names = [row.name for row in table]
    assert "kubetrain / mpi-operator v0.8.0: apply -> first step, 2 workers" in names, names
    assert "kubetrain / floor: apply -> first step, 2 workers" in names, names


def test_missing_image(jobs: Jobs) -> None:
    """A job whose image does not exist fails with reason ImagePullFailed and a message naming the image and
    ErrImagePull or ImagePullBackOff (after its one restart: the image never comes)."""
    name, image = "cifar-mixup-missing-image", f"{REGISTRY}/kubetrain/does-not-exist:{TAG}"
    jobs.apply(cifar_mixup(name, 1, image))
    status = jobs.wait_for_phase(name, FAILED, timeout=600)
    message = status.get("message") or ""
    LOG.info("%s: Failed %s: %s", name, status.get("reason"), message)
    assert status.get("reason") == IMAGE_PULL_FAILED, f"{name} failed with reason {status.get('reason')}"
    assert image in message, f"the status message does not name the image {image}: {message}"
    assert "ErrImagePull" in message or "ImagePullBackOff" in message, \
        f"the status message does not say ErrImagePull or ImagePullBackOff: {message}"


def test_delete(installed: KindCluster) -> None:
    """`kubectl delete dtr --all` (the jobs the tests above left) leaves no child of any job: no pod, Job, Service,
    ConfigMap, Secret, ServiceAccount, Role or RoleBinding."""
    installed.kubectl("delete", "distributedtrainings", "--all", "--namespace", NAMESPACE, "--wait=true",
                      "--timeout=120s", timeout=150)
    poll(lambda: None if children(installed) else True, 180, "every child of every DistributedTraining to go",
         lambda: f"left: {children(installed)}")


def test_upgrade(jobs: Jobs, installed: KindCluster) -> None:
    """docs/install.md's upgrade, as written: the CRD applied again, `helm upgrade --reuse-values --set replicas=2`.
    Both operator pods are Ready and still run the registry's image (the install's values kept), and a job created
    afterwards runs. Its ranks only sleep: the uninstall below needs a running job, not its training."""
    upgrade = section_commands(REPO / "docs" / "install.md", "Upgrade")
    installed.run_documented(upgrade)
    assert installed.crd_established()
    pods = installed.operator_pods()
    assert len(pods) == 2 and installed.operator_pods_ready(), f"after the upgrade: {pods}"
    images = {pod["spec"]["containers"][0]["image"] for pod in pods}
    assert all(image.startswith(f"{REGISTRY}/") for image in images), f"--reuse-values lost imageRegistry: {images}"
    name = "cifar-mixup-after-upgrade"
    body = cifar_mixup(name, 1)
    body["spec"]["command"] = ["sleep", "600"]
    jobs.apply(body)
    jobs.wait_for_phase(name, RUNNING)


def test_uninstall(installed: KindCluster) -> None:
    """docs/install.md's uninstall, as written. `helm uninstall` leaves nothing in the release's namespace once the
    operator's pods are gone (their Lease, owned by the leader's pod, goes with it) and no cluster role, but the CRD
    stays and with it the users' DistributedTrainings and their running pods; `kubectl delete dtr` takes each job's
    children with it, with no operator; deleting the CRD leaves no DistributedTraining. The claims stay."""
    uninstall, claims = section_commands(REPO / "docs" / "install.md", "Uninstall"), claim_names(installed)
    installed.run_documented(uninstall[:1])
    poll(lambda: None if installed.release_leftovers() else True, 120, "helm uninstall to leave nothing of ours",
         lambda: f"left: {installed.release_leftovers()}")
    left = installed.run_documented(uninstall[1:2])[uninstall[1]]
    assert "cifar-mixup-after-upgrade" in left, f"the job started after the upgrade is gone with the release:\n{left}"
    assert children(installed), "the running job's pods went with the release"
    installed.run_documented(uninstall[2:3])
    poll(lambda: None if children(installed) else True, 180, "every child of every DistributedTraining to go",
         lambda: f"left: {children(installed)}")
    installed.run_documented(uninstall[3:])
    poll(lambda: True if installed.kubectl_result("get", "crd", CRD).returncode != 0 else None, 120,
         f"the CRD {CRD} to go", lambda: installed.kubectl_result("get", "crd", CRD).stdout)
    assert claim_names(installed) == claims, f"the claims changed: {claims} -> {claim_names(installed)}"


def kubetrain(jobs: Jobs, command: str, name: str, *options: str, timeout: float = 300
              ) -> subprocess.CompletedProcess[str]:
    """`kubetrain <command> <name> -n <namespace> [options]` as the cluster's admin."""
    return subprocess.run([*KUBETRAIN, command, name, "-n", NAMESPACE, *options], capture_output=True, text=True,
                          env=jobs.cluster.env(), timeout=timeout)


def kubetrain_wait(jobs: Jobs, name: str) -> subprocess.CompletedProcess[str]:
    """`kubetrain wait <name>` with the settings' training timeout."""
    seconds = jobs.cluster.settings.timeout
    return kubetrain(jobs, "wait", name, "--timeout", str(seconds), timeout=seconds + 60)


def kubetrain_logs(jobs: Jobs, name: str, *options: str) -> subprocess.CompletedProcess[str]:
    """`kubetrain logs <name> -n <namespace> [options]`, which must succeed; a kept copy's note is on stderr."""
    done = kubetrain(jobs, "logs", name, *options)
    assert done.returncode == 0, f"kubetrain logs {name} {' '.join(options)} exited {done.returncode}: {done.stderr}"
    return done


def children(cluster: KindCluster) -> list[str]:
    """Every child of every DistributedTraining still in NAMESPACE."""
    kinds = ",".join(child.plural for child in CHILD_KINDS if child.watched)
    return cluster.kubectl("get", kinds, "--namespace", NAMESPACE, f"--selector={LABEL_JOB}", "--output=name").split()


def claim_names(cluster: KindCluster) -> list[str]:
    return cluster.kubectl("get", "pvc", "--namespace", NAMESPACE, "--output=name").split()


def assert_finished(jobs: Jobs, name: str, epochs: int, table: str | None = None) -> str:
    """`kubectl get dtr` (`table` if given) shows the columns, Succeeded, every epoch and a metric; status.progress
    shows the last epoch and a held-out accuracy well above chance, status.checkpoint the last epoch. Returns the
    checkpoint's path."""
    table = table if table is not None else jobs.table(name)
    header = table.splitlines()[0]
    assert re.fullmatch(r"NAME +PHASE +WORKERS +EPOCH +METRIC +AGE", header), \
        f"kubectl get dtr should show the columns NAME PHASE WORKERS EPOCH METRIC AGE: {header}"
    row = table.splitlines()[1].strip()
    LOG.info("kubectl get dtr: %s", row)
    assert re.match(rf"{re.escape(name)} +Succeeded +[0-9]+/2 +{epochs}/{epochs} +[a-z_]+=[0-9.]+ +", row), \
        f"kubectl get dtr should show Succeeded, {epochs}/{epochs} epochs and a metric: {row}"
    status = jobs.status(name)
    progress, checkpoint = status.get("progress") or {}, status.get("checkpoint") or {}
    assert progress.get("epochs") == epochs and progress.get("epoch") == epochs, \
        f"status.progress should show epoch {epochs} of {epochs}: {progress}"
    accuracy = (progress.get("metrics") or {}).get("val_accuracy")
    assert accuracy is not None and accuracy > LEARNED, \
        f"status.progress.metrics should show val_accuracy above {LEARNED} (chance is 0.1): {progress}"
    assert checkpoint.get("path") and checkpoint.get("epoch") == epochs, \
        f"status.checkpoint should name the epoch-{epochs} checkpoint: {checkpoint}"
    assert_started(status)
    return str(checkpoint["path"])


def assert_started(status: dict[str, Any]) -> None:
    """status.startup shows the last attempt's every phase, up to rank 0's first step, and waits for nothing."""
    startup, attempt = status.get("startup") or {}, status.get("attempt", 0)
    phases = startup.get("phases") or []
    LOG.info("startup of attempt %s: %s", attempt, ", ".join(f"{p['name']} +{p['seconds']}s" for p in phases))
    first = "Created" if attempt == 0 else "Restarted"
    assert [p["name"] for p in phases] == [first, "Scheduled", "ContainersStarted", "WorkersReady", "LauncherStarted",
                                           "WorldUp", "FirstStep"], f"status.startup should show every phase: {startup}"
    assert startup.get("attempt") == attempt and not startup.get("waitingFor"), startup
    assert abs(startup["seconds"] - sum(p["seconds"] for p in phases)) < 0.5, startup


def delete_worker_after_an_epoch(jobs: Jobs, name: str) -> int:
    """Once the job reports a finished epoch, deletes its pod <name>-worker-1; returns the epoch it reported then."""

    def finished_epoch(status: dict[str, Any]) -> int | None:
        if status.get("phase") == SUCCEEDED:
            raise AssertionError(f"{name} finished before a worker could be deleted")
        epoch = field(status, "progress.epoch") or 0
        return epoch if epoch >= 1 else None

    epoch = jobs.wait_for(name, "a finished epoch", finished_epoch)
    LOG.info("epoch %d done: deleting pod %s", epoch, worker_name(name, 1))
    jobs.cluster.kubectl("delete", "pod", worker_name(name, 1), "--namespace", NAMESPACE, "--wait=false")
    return epoch


def ready_since(pod: dict[str, Any]) -> str:
    """When the pod last became Ready."""
    return next(condition["lastTransitionTime"] for condition in pod["status"]["conditions"]
                if condition["type"] == "Ready")


def seconds_to_train_again(log: str, ready_at: str) -> float | None:
    """From the replacement's Ready to the first training of more than one rank after the shrink to one, read from
    the launcher's log with --timestamps."""
    shrunk = False
    for line in log.splitlines():
        found = re.match(r"(\S+) .*?(\d+) ranks train from epoch", line)
        if not found:
            continue
        if found.group(2) == "1":
            shrunk = True
        elif shrunk and moment(found.group(1)) >= moment(ready_at):
            return (moment(found.group(1)) - moment(ready_at)).total_seconds()
    return None


def moment(timestamp: str) -> datetime:
    """An RFC 3339 timestamp (kubectl's, to the nanosecond) to the microsecond."""
    return datetime.fromisoformat(timestamp.rstrip("Z")[:26])
