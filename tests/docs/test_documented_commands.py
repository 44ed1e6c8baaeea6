"""Every command line the documentation shows (every README.md, the pages of docs/ and CHANGELOG.md: a line of a
command block, or an inline `command` in the prose) either runs here, as written, in a test below (`RUN`), or is
listed in `NOT_RUN` (or is of a kind in `NOT_RUN_KINDS`) with why it cannot run here; a bare `python -m <module>`
naming an entry point runs with `--help` (tests/docs/test_job_commands.py). A command added to any of them without
either fails `test_every_documented_command_is_run_or_listed`.

The commands run as a user who activated the environment would run them (its bin first on PATH), in a temporary
working copy holding the job files, so that what they write (runs/, training.csv) lands there. Where a document writes
to the data volume's path `/data`, that folder is one of the test's own; every other argument is the document's."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart import helm_binary
from tests.support.documented import (
    JOB_FILES,
    REPO,
    Command,
    documented_commands,
    python_modules,
    section_commands,
    table_after,
)

# Commands a test below runs, and which test.
RUN = {
    "kubetrain run jobs/cifar_mixup/job.yaml --local": "test_the_users_path_run_local_asks_for_the_data_folder",
    "pip install ./operator": "test_the_kubetrain_command_installs_on_its_own_without_tensorflow",
    "kubetrain version": "test_the_kubetrain_command_installs_on_its_own_without_tensorflow",
    "python -m cifar_mixup.convert digits --out runs/digits/cifar10": "test_running_a_job_on_your_machine",
    "kubetrain run jobs/cifar_mixup/job.yaml --local --data-dir runs/digits --checkpoint-dir runs -- --epochs 2":
        "test_running_a_job_on_your_machine",
    "kubetrain render jobs/cifar_mixup/job.yaml": "test_render_prints_the_objects_of_the_reference_table",
    "python -m higgs.synthetic training.csv --events 20000": "test_higgs_readme_from_synthetic_events_to_a_model",
    "python -m higgs.convert training.csv /data/higgs": "test_higgs_readme_from_synthetic_events_to_a_model",
    "horovodrun -np 2 python -m higgs --data-dir /data/higgs --trainer allreduce":
        "test_higgs_readme_from_synthetic_events_to_a_model",
    "python -m ucluster.synthetic /data/ucluster": "test_ucluster_synthetic_writes_the_layout_the_job_reads",
}

CLUSTER = "talks to a Kubernetes cluster (the controlplane tier installs the chart and runs jobs on a real API server)"
CLUSTER_NAMED = f"{CLUSTER}; <name> is the reader's job"
FOLLOW = ("follows a job in a Kubernetes cluster: tests/controlplane/test_cli_follow.py runs it as written, on a job "
          "of that name in the namespace of its kubeconfig's current context")
KIND_CLUSTER = "needs kind and Docker: the e2e tier (tests/e2e/test_kind.py) runs this path end to end"
LOGS = ("reads a job's launcher output in a Kubernetes cluster: tests/controlplane/test_cli_logs.py runs it as "
        "written, on a job of that name (kwok runs no container: the one line saying the log cannot be read), and "
        "tests/e2e/test_kind.py::test_restart_and_the_logs_of_both_attempts reads real output with the same options")
MENTION = "a tool and subcommand named in a sentence, not a whole command line"
INSIDE_PODS = "what the launcher runs inside the pods (the launch and images tiers run it), not a reader's command"
TIER = "runs a test tier or the whole suite: make test runs every tier"
BUILD = "builds images or binaries (minutes of Docker or Go builds): make test runs it before the tiers"
PLACEHOLDER = "a placeholder (<program>, job.yaml, N) stands for the reader's own; the real ones run here"
CIFAR10 = ("needs the CIFAR-10 download (cifar-10-batches-py), which tests cannot fetch; "
           "tests/jobs/test_cifar_mixup_convert.py converts small files in its format")
MNIST = ("needs the MNIST IDX files (a download) or the HDF5 made from them in /data/mnist; "
         "tests/jobs/test_mnist_convert.py converts small files in that format and tests/jobs/test_mnist.py trains")
CIFAR_TRAINING = ("needs CIFAR-10 (a download) in /data/cifar10, then trains 30 (--compare: 2 x 60) CIFAR-10 epochs "
                  "on 2 CPU ranks, hours; test_job_commands runs the same command up to the data, "
                  "test_running_a_job_on_your_machine trains this program on digits")

# Commands no test runs, and why.
NOT_RUN = {
    "make demo": "runs .ci/setup, then trains cifar_mixup on digits for 10 epochs with 2 ranks: a few minutes on 2 "
                 "cores (cifar_mixup/demo.py says so); `python -m cifar_mixup.demo --help` runs here and the same "
                 "program trains on digits in test_running_a_job_on_your_machine",
    "make test": TIER,
    "kubectl get dtr -o wide": f"{CLUSTER}; tests/controlplane/test_operator_kueue.py reads its Reason column",
    "make unit": TIER,
    "make test LANES=1": TIER,
    "docker system prune -af": "removes every Docker image and cache of this machine (how the cold CI time is "
                               "measured): a test must never run it",
    ".ci/run": TIER,
    "make images": BUILD,
    "images/build.sh base entrypoints cifar_mixup": BUILD,
    ".ci/base-images": BUILD,
    "tests/controlplane/build.sh": BUILD,
    "tests/controlplane/build-gang-schedulers.sh": BUILD,
    "tests/e2e/kind-node/build.sh": BUILD,
    "tests/e2e/registry/build.sh": BUILD,
    "tests/bench/peer/build.sh": BUILD,
    "tests/images/byo/build.sh": BUILD,
    ".ci/setup": "sets the machine up (apt packages, the venv, Docker engine): make test and make images run it first",
    ".ci/docker-engine": "starts a Docker engine (root, daemon): .ci/setup runs it",
    "images/build.sh base-gpu cifar_mixup-gpu": f"{BUILD}; tests/images/test_gpu_image.py builds those missing",
    "horovodrun --check-build": "what tests/images/test_gpu_image.py runs inside the GPU image, as a user would: "
                                "this machine's Horovod is the CPU one",
    "mpirun --version": INSIDE_PODS,
    "mpirun -np <ranks> --hostfile ... --bind-to none --map-by slot -x <every forwarded variable>": INSIDE_PODS,
    "/bin/sh": MENTION,
    "kubetrain worker: error: sshd not found in image registry.example.com/own:1: install openssh-server":
        "the entrypoint's message for an image without sshd, quoted; tests/images/test_own_image.py sees it",
    "docker run --privileged": "the failure .ci/runc-wrapper works around, quoted in a sentence",
    "docker build": MENTION,
    "docker commit": MENTION,
    "helm install kubetrain charts/kubetrain --namespace kubetrain-system --create-namespace":
        f"{CLUSTER}; tests/controlplane/test_helm_install.py installs the chart",
    "helm install kubetrain charts/kubetrain --namespace kubetrain-system --create-namespace --set "
    "'watch.namespaces={team-a,team-b}'": f"{CLUSTER}; tests/controlplane/test_helm_install.py installs the chart",
    "helm upgrade kubetrain charts/kubetrain --namespace kubetrain-system --reuse-values --set "
    "'watch.namespaces={a,b,new}'": f"{CLUSTER}; test_documented_helm_lines_render renders it",
    "helm install kubetrain charts/kubetrain --namespace kubetrain-system --create-namespace --set "
    "imageRegistry=registry.example.com --set 'imagePullSecrets[0].name=registry-credentials'":
        f"{CLUSTER}; test_documented_helm_lines_render renders it",
    "images/build.sh --registry registry.example.com --push": "pushes to the reader's registry; the kind tier's "
                                                              "quick start builds and pushes to a real one",
    "images/build.sh --registry localhost:5001 --push": "builds and pushes every image: the kind tier's quick start "
                                                        "pushes the four its cluster runs",
    "docker login registry.example.com": "logs in to the reader's registry",
    "kubectl create secret docker-registry": MENTION,
    "helm install": MENTION,
    "helm install kubetrain": MENTION,
    "helm upgrade": MENTION,
    "helm uninstall": MENTION,
    "kubectl apply -f jobs/cifar_mixup/job.yaml":
        f"{CLUSTER}; tests/controlplane/test_documented_yaml.py sends this file to the API server (dry run)",
    "kubectl get dtr": CLUSTER,
    "kubectl get dtr -w": CLUSTER,
    "kubectl describe dtr cifar-mixup": CLUSTER,
    "kubectl delete dtr --all": CLUSTER,
    "kubectl --namespace kubetrain-system rollout status deployment/kubetrain": CLUSTER,
    "kubectl -n kubetrain-system logs deployment/kubetrain": CLUSTER,
    "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu": CLUSTER,
    "kubectl describe dtr <name>": CLUSTER_NAMED,
    "kubectl get dtr <name> -o yaml": f"{CLUSTER_NAMED}; a failed kind test's report shows its status part",
    "kubectl get pods -l kubetrain.dev/job-name=<name>": CLUSTER_NAMED,
    "kubectl logs job/<name>-launcher": CLUSTER_NAMED,
    "kubectl logs <name>-worker-0": CLUSTER_NAMED,
    "kubectl get": MENTION,
    "kubectl scale": MENTION,
    "kubectl scale dtr NAME --replicas N": f"{CLUSTER_NAMED}; tests/controlplane/test_operator_elastic.py scales an "
                                           "elastic job and the kind tier's test_elastic_and_its_tensorboard grows "
                                           "one from 2 to 3",
    "kubectl apply": MENTION,
    "kubetrain status cifar-mixup -n team-a": f"{CLUSTER}: it reads the job's status from the cluster",
    "kind delete cluster": f"removes the quick start's cluster: {KIND_CLUSTER}, and deletes its cluster afterwards",
    "docker rm -f kind-registry": "removes the quick start's registry: the kind tier's harness removes it afterwards",
    "python -m cifar_mixup.convert digits": "the command of examples/kind/volumes.yaml's Job, which the kind tier's "
                                            "quick start runs",
    "kubectl cp": MENTION,
    "kubectl delete pvc": MENTION,
    "images/build.sh --registry R --push": f"{PLACEHOLDER}; the kind tier's quick start runs it with localhost:5001",
    "kubetrain status cifar-mixup --watch": FOLLOW,
    "kubetrain wait cifar-mixup --timeout 3600": FOLLOW,
    "kubetrain wait cifar-mixup": f"{FOLLOW}; the kind tier's test_own_image and test_a_failing_rank_is_named_in_the_"
                                  "status_and_kubetrain_wait_exits_1 run it on jobs that succeed and fail",
    "kubectl describe dtr": MENTION,
    "kubetrain status --watch": MENTION,
    "kubetrain status": f"{MENTION}; tests/controlplane/test_progress_reporting.py runs it on a job of its own",
    "kubetrain tensorboard NAME --port P": f"{PLACEHOLDER}; {KIND_CLUSTER} (test_elastic_and_its_tensorboard)",
    "helm upgrade --reuse-values --set replicas=2": f"{MENTION}: docs/install.md's upgrade, which the kind tier runs",
    "kubectl apply -f jobs/cifar_mixup/job.yaml && kubetrain wait cifar-mixup":
        f"{CLUSTER}; tests/controlplane/test_documented_yaml.py sends this file to the API server (dry run) and "
        "tests/controlplane/test_cli_follow.py runs `kubetrain wait cifar-mixup` on a job of that name",
    "tests/e2e/kind-node/cni.sh": f"configures the nodes of a kind cluster: {KIND_CLUSTER}",
    "kind load docker-image": MENTION,
    "kind build node-image": MENTION,
    "mpirun -x": INSIDE_PODS,
    "mpirun -np N": PLACEHOLDER,
    "horovodrun --mpi": MENTION,
    "python -m <program>": PLACEHOLDER,
    "kubetrain run job.yaml --local": PLACEHOLDER,
    "python examples/notebook.py": f"{CLUSTER}; tests/unit/operator/test_python_client.py runs its main() against "
                                   "a scripted API server, tests/controlplane/test_python_client.py makes them on a "
                                   "real one",
    "kubetrain wait": MENTION,
    "kubetrain logs": MENTION,
    "kubetrain logs cifar-mixup": LOGS,
    "kubetrain logs cifar-mixup -f": LOGS,
    "kubetrain logs cifar-mixup --attempt 0": LOGS,
    "kubetrain logs cifar-mixup --rank 1": LOGS,
    "kubetrain logs <name> --attempt <N>": PLACEHOLDER,
    "kubetrain logs NAME": PLACEHOLDER,
    "kubetrain logs NAME -f": f"{PLACEHOLDER}; {KIND_CLUSTER} (test_restart_and_the_logs_of_both_attempts)",
    "kubetrain run --local": MENTION,
    "kubetrain status NAME --watch": PLACEHOLDER,
    "kubetrain tensorboard cifar-mixup":
        "forwards to a job's pod in a Kubernetes cluster: the kind tier's test_elastic_and_its_tensorboard "
        "(tests/e2e/test_kind.py) runs `kubetrain tensorboard <its job> --port <a free port>` and reads the job's "
        "scalars through it; "
        "tests/unit/operator/test_tensorboard_command.py runs its errors",
    "kubetrain tensorboard": MENTION,
    "kubetrain tensorboard NAME": PLACEHOLDER,
    "kubetrain render": MENTION,
    "kubectl port-forward": MENTION,
    "kubectl logs": MENTION,
    "kubetrain wait NAME [--timeout SECONDS]": PLACEHOLDER,
    ".venv/bin/python -m tests.jobs.soak --runs 50":
        "every kill-and-resume case 50 times, about 5 hours here; `python -m tests.jobs.soak --help` runs here and "
        "the jobs tier runs one kill-and-resume of each program",
    ".venv/bin/python -m tests.jobs.soak --runs 5 --cases higgs-mpi":
        "the higgs MPI cases 5 times each, about half an hour here; `python -m tests.jobs.soak --help` runs here",
    ".venv/bin/python -m tests.bench.first_step_kind --size full":
        "the full kind benchmark (a kind cluster, 2 and 4 workers, 4 rounds of both operators, the floors): about 47 "
        "minutes here; the kind tier runs its small size (test_time_to_first_step_beside_mpi_operator)",
    "kubectl exec": MENTION,
    ".venv/bin/python -m tests.bench --size full":
        "the full benchmark (500 jobs against two operators, training benchmarks at full size): far beyond a test; "
        "the bench tier runs --size small and `python -m tests.bench --help` runs here",
    "python -m cifar_mixup.convert cifar10": CIFAR10,
    "python -m cifar_mixup.convert cifar10 --source cifar-10-batches-py --out /data/cifar10": CIFAR10,
    "horovodrun -np 2 python -m cifar_mixup --data-dir /data/cifar10": CIFAR_TRAINING,
    "horovodrun -np 2 python -m cifar_mixup --compare --data-dir /data/cifar10 --epochs 60 --seed 1": CIFAR_TRAINING,
    "mpirun -np 8 python -m higgs.compare --data-dir /data/higgs":
        "all 7 trainers in turn on 8 TensorFlow ranks, on 2 cores (one trainer on 2 ranks takes about 50 s here); "
        "test_higgs_readme_from_synthetic_events_to_a_model trains one and test_job_commands runs "
        "compare.yaml's command up to the data",
    "python -m mnist.convert --source /downloads/mnist --out /data/mnist": MNIST,
    "horovodrun -np 2 python -m mnist --data-dir /data/mnist": MNIST,
    "python -m mnist --strategy mirrored --data-dir /data/mnist": MNIST,
    "TF_CONFIG='{\"cluster\": {\"worker\": [\"h0:2222\", \"h1:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": "
    "0}}' python -m mnist --strategy multiworker --data-dir /data/mnist":
        f"{MNIST}; and two machines h0 and h1 to be the workers",
    "horovodrun -np 2 python -m ucluster --data-dir /data/ucluster --checkpoint-dir runs/ucluster":
        "10 epochs at the notebook's sizes (batch 1024 per rank, 20,000 jets): its first epoch alone took 5 minutes "
        "here (2 cores shared with builds); the jobs tier trains ucluster small",
}
# The README's kind quick start and docs/install.md's upgrade and uninstall: the kind tier runs these lines as written
# (tests/e2e/test_kind.py: test_quick_start, test_upgrade, test_uninstall).
KIND_RUN = [*section_commands(REPO / "README.md", "Quick start on kind"),
            *section_commands(REPO / "docs" / "install.md", "Upgrade"),
            *section_commands(REPO / "docs" / "install.md", "Uninstall")]
# Whole kinds of command, and why none of them runs here: `pytest -m <tier>` or `pytest tests/<tier>` is a test tier.
NOT_RUN_KINDS = ((re.compile(r"(python3? -m )?pytest( .*)?"), TIER),)
_BARE_PYTHON_M = re.compile(r"python3? -m ([A-Za-z_][A-Za-z0-9_.]*)")
COMMANDS = documented_commands()


def documented_command(text: str) -> list[str]:
    """The command line `text` of the documentation (it must still be in a document), split as the shell splits it."""
    assert text in {command.text for command in COMMANDS}, f"no document shows `{text}` any more: update RUN"
    return shlex.split(text)


def activated() -> dict[str, str]:
    """The environment of a user who activated the environment kubetrain and the programs are installed in."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def working_copy(tmp_path: Path) -> Path:
    """A folder holding the job files where the repository has them, for the commands that name them."""
    copy = tmp_path / "repo"
    for path in JOB_FILES:
        target = copy / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return copy


def run(words: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, cwd=cwd, env=activated(), capture_output=True, text=True, timeout=timeout)


def on_volume(words: list[str], volume: Path) -> list[str]:
    """The words with the data volume's path /data standing for `volume` (a folder of the test's own)."""
    return [str(volume) + word[len("/data"):] if word == "/data" or word.startswith("/data/") else word
            for word in words]


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_every_documented_command_is_run_or_listed() -> None:
    help_covered = {command.text for command in COMMANDS
                    if (match := _BARE_PYTHON_M.fullmatch(command.text)) and match.group(1) in python_modules()}
    missing: dict[str, Command] = {}
    for command in COMMANDS:
        of_a_kind = any(pattern.fullmatch(command.text) for pattern, _ in NOT_RUN_KINDS)
        if command.text not in RUN and command.text not in NOT_RUN and command.text not in help_covered \
                and command.text not in KIND_RUN and not of_a_kind:
            missing.setdefault(command.text, command)
    assert not missing, "documented commands neither run by a test (RUN) nor listed with why not (NOT_RUN): " + \
        "; ".join(f"{c.file}:{c.line}: {text}" for text, c in missing.items())
    texts = {command.text for command in COMMANDS}
    stale = sorted(set(RUN) - texts) + sorted(set(NOT_RUN) - texts)
    assert not stale, f"RUN/NOT_RUN list commands no document shows any more: {stale}"
    assert not set(RUN) & set(NOT_RUN)


def test_the_documentation_shows_the_command_lines_this_tier_was_written_for() -> None:
    # guards the extraction: a broken parser would find nothing and the test above would pass on nothing
    blocks = {(command.file, command.text) for command in COMMANDS if not command.inline}
    assert {("README.md", "make demo"), ("docs/run-locally.md", "kubetrain render jobs/cifar_mixup/job.yaml"),
            ("jobs/higgs/README.md", "python -m higgs.synthetic training.csv --events 20000"),
            ("docs/install.md", "kubectl apply -f charts/kubetrain/crds/")} <= blocks
    assert any(command.inline and command.text == "make unit" and command.file == "docs/development.md"
               for command in COMMANDS)
    assert {command.file for command in COMMANDS} >= {"README.md"} | {
        f"docs/{page}.md" for page in ("install", "kind", "troubleshooting", "benchmarks", "development")}


HELM_LINE = re.compile(r"helm (install|upgrade) \S+ charts/kubetrain( .*)?")


def test_documented_helm_lines_render() -> None:
    # Installing needs a cluster. Each `helm install` or `helm upgrade` line of the documentation is rendered instead
    # (`helm template`, same release, chart and values): a value the chart's schema refuses fails here.
    lines = [command for command in COMMANDS if HELM_LINE.fullmatch(command.text)]
    assert len({command.text for command in lines}) >= 5, [command.text for command in lines]
    for command in lines:
        words = shlex.split(command.text)
        flags = [word for word in words[4:] if word not in ("--create-namespace", "--reuse-values")]
        done = subprocess.run([str(helm_binary()), "template", words[2], words[3], *flags], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command.file}:{command.line}: {command.text}: {done.stderr}"


def test_the_users_path_run_local_asks_for_the_data_folder(tmp_path: Path) -> None:
    # README "A 30-second example": `kubetrain run jobs/cifar_mixup/job.yaml --local`, "the same spec, on this machine".
    # This machine has no data volume at /data: the run must stop before starting anything, naming /data and the flag.
    words = documented_command("kubetrain run jobs/cifar_mixup/job.yaml --local")
    if os.path.exists("/data"):
        pytest.skip("this machine has /data, which the job would read")
    cwd = working_copy(tmp_path)
    done = run(words, cwd, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "/data" in done.stderr and "--data-dir" in done.stderr, done.stderr
    assert not (cwd / "runs").exists(), "nothing may be written when the run cannot start"


def test_running_a_job_on_your_machine(tmp_path: Path) -> None:
    # docs/run-locally.md, its first two lines in order.
    convert = documented_command("python -m cifar_mixup.convert digits --out runs/digits/cifar10")
    train = documented_command("kubetrain run jobs/cifar_mixup/job.yaml --local --data-dir runs/digits "
                           "--checkpoint-dir runs -- --epochs 2")
    cwd = working_copy(tmp_path)
    done = run(convert, cwd, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run(train, cwd, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "running default/cifar-mixup locally with 2 rank(s)" in done.stderr, done.stderr[-3000:]
    assert "on all 2 ranks" in done.stderr, done.stderr[-3000:]
    assert "progress reporting is off" in done.stderr, "no cluster: KUBETRAIN_REPORT_STATUS must be unset"
    # the job writes to <checkpoint dir>/<namespace>/<name>, as in the cluster; rank 0 alone
    job_dir = cwd / option(train, "--checkpoint-dir") / "default" / "cifar-mixup"
    records = [json.loads(path.read_text()) for path in sorted(job_dir.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2], sorted(path.name for path in job_dir.iterdir())
    assert {record["rank"] for record in records} == {0}
    for written in ("history.json", "history.png", "evaluation.json"):
        assert (job_dir / written).is_file(), sorted(path.name for path in job_dir.iterdir())


def test_render_prints_the_objects_of_the_reference_table() -> None:
    # docs/reference.md "What the operator creates": for each DistributedTraining the operator creates the objects of
    # its table, "all owned by it" and "all labelled kubetrain.dev/job-name=<name>"; `kubetrain render` prints them.
    done = run(documented_command("kubetrain render jobs/cifar_mixup/job.yaml"), REPO, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr
    objects: list[dict[str, Any]] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    name = "cifar-mixup"
    table = table_after("docs/reference.md", "What the operator creates",
                        "For each DistributedTraining the operator creates")
    assert table, "docs/reference.md's table of objects is gone"
    rows = []
    for cells in table:
        kinds = [kind.strip().removesuffix("s") if kind.strip() == "Pods" else kind.strip()
                 for kind in cells[0].split(",")]
        patterns = [re.escape(pattern).replace(re.escape("<name>"), re.escape(name)).replace(re.escape("<i>"), r"\d+")
                    for pattern in re.findall(r"`([^`]+)`", cells[1])]
        rows.append((kinds, patterns))
    shown = [(o["kind"], o["metadata"]["name"]) for o in objects]
    for kinds, patterns in rows:
        for kind in kinds:
            assert any(k == kind and any(re.fullmatch(p, n) for p in patterns) for k, n in shown), \
                f"docs/reference.md's table promises a {kind} named {patterns}; render shows {shown}"
    unlisted = [(k, n) for k, n in shown
                if not any(k in kinds and any(re.fullmatch(p, n) for p in patterns) for kinds, patterns in rows)]
    assert not unlisted, f"render shows objects docs/reference.md's table does not list: {unlisted}"
    for o in objects:
        assert o["metadata"]["labels"]["kubetrain.dev/job-name"] == name, o["metadata"]
        assert [(ref["kind"], ref["name"]) for ref in o["metadata"]["ownerReferences"]] == [
            ("DistributedTraining", name)], o["metadata"]


def test_higgs_readme_from_synthetic_events_to_a_model(tmp_path: Path) -> None:
    # jobs/higgs/README.md: synthetic events in the challenge format, converted to HDF5, trained with allreduce.
    synthetic = documented_command("python -m higgs.synthetic training.csv --events 20000")
    convert = documented_command("python -m higgs.convert training.csv /data/higgs")
    train = documented_command("horovodrun -np 2 python -m higgs --data-dir /data/higgs --trainer allreduce")
    volume = tmp_path / "data"
    for words in (synthetic, convert):
        done = run(on_volume(words, volume), tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in (volume / "higgs").iterdir()) == ["test.h5", "train.h5"]
    done = run(on_volume(train, volume), tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    result = json.loads((tmp_path / "runs" / "higgs" / "result.json").read_text())  # default: ./runs/<program>
    assert 0.0 < result["f1"] <= 1.0, result


def test_ucluster_synthetic_writes_the_layout_the_job_reads(tmp_path: Path) -> None:
    # jobs/ucluster/README.md: `--data-dir` holds train_files.txt and test_files.txt naming HDF5 files.
    words = on_volume(documented_command("python -m ucluster.synthetic /data/ucluster"), tmp_path / "data")
    done = run(words, tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    data = tmp_path / "data" / "ucluster"
    for listing in ("train_files.txt", "test_files.txt"):
        names = (data / listing).read_text().split()
        assert names and all((data / name).is_file() for name in names), (listing, names)


def test_the_kubetrain_command_installs_on_its_own_without_tensorflow(tmp_path: Path) -> None:
    # README, Install: `pip install ./operator` gives the kubetrain command without TensorFlow; `kubetrain version`.
    copy = working_copy(tmp_path)
    shutil.copytree(REPO / "operator", copy / "operator", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}

    def in_venv(words: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(words, cwd=copy, env=env, capture_output=True, text=True, timeout=600)

    installed = in_venv(documented_command("pip install ./operator"))
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    version = in_venv(documented_command("kubetrain version"))
    assert version.returncode == 0 and re.fullmatch(r"kubetrain \d+\.\d+\.\d+ \(kubetrain\.dev/v1alpha1\)\n",
                                                    version.stdout), version
    assert shutil.which("kubetrain", path=str(venv / "bin")), "pip install ./operator put no kubetrain in the venv"
    rendered = in_venv(["kubetrain", "render", "jobs/cifar_mixup/job.yaml"])
    assert rendered.returncode == 0 and "kind: Job" in rendered.stdout, rendered.stderr
    tensorflow = in_venv(["python", "-c", "import tensorflow"])
    assert tensorflow.returncode != 0, "pip install ./operator installed TensorFlow"
