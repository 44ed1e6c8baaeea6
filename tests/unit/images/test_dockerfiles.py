"""The images install what CI tests, run as non-root, and name only files that exist.

Docker is not needed: dockerfile-parse reads every images/*/Dockerfile and the checks compare it with the repository.
hadolint (`make lint`) checks the Dockerfiles themselves, such as that no stage ends as root (DL3002).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from kubetrain.api import parse_job
from kubetrain.contract import ENTRYPOINTS, ENTRYPOINTS_IMAGE
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.validation import defaulted
from tests.support.programs import PROGRAMS, image_name

REPO = Path(__file__).resolve().parents[3]
IMAGES = REPO / "images"
DEFAULT_USER = defaulted({"spec": {}})["spec"]["runAsUser"]  # the CRD's default
JOBS_REQUIREMENTS = "jobs/requirements.txt"
OPERATOR_REQUIREMENTS = "operator/requirements.txt"
CONSTRAINTS = ".ci/constraints.txt"


@dataclass(frozen=True)
class Dockerfile:
    """One Dockerfile as dockerfile-parse reads it: (keyword, value) of each instruction, continuations joined."""

    instructions: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, path: Path) -> Dockerfile:
        return cls(tuple((i["instruction"], i["value"]) for i in DockerfileParser(path=str(path)).structure))

    def values(self, keyword: str, *, final_stage: bool = False) -> list[str]:
        """The values of the `keyword` instructions, of the last stage only with final_stage."""
        instructions = self.instructions
        if final_stage:
            instructions = instructions[max(n for n, (k, _) in enumerate(instructions) if k == "FROM") :]
        return [value for k, value in instructions if k == keyword]

    def copies(self) -> list[tuple[list[str], str]]:
        """(repository sources, image destination) of every COPY/ADD from the build context."""
        result = []
        for value in self.values("COPY") + self.values("ADD"):
            words = shlex.split(value)
            if any(w.startswith("--from=") for w in words):
                continue
            paths = [w for w in words if not w.startswith("--")]
            result.append((paths[:-1], paths[-1]))
        return result

    def image_path_source(self, image_path: str) -> str | None:
        """The repository file an image path was copied from (exact file, or a file inside a copied folder)."""
        for sources, destination in self.copies():
            for source in sources:
                if destination.endswith("/"):
                    if source.endswith("/") and image_path.startswith(destination):
                        return source + image_path[len(destination) :]
                    if image_path == destination + os.path.basename(source):
                        return source
                elif image_path == destination:
                    return source
        return None


def dockerfiles() -> dict[str, Dockerfile]:
    return {path.parent.name: Dockerfile.read(path) for path in sorted(IMAGES.glob("*/Dockerfile"))}


def pip_installs(dockerfile: Dockerfile) -> list[list[str]]:
    """The argument lists of every `pip install` in RUN instructions (split on && and ;)."""
    found = []
    for run in dockerfile.values("RUN"):
        lexer = shlex.shlex(run, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word.strip(";&|()"):
                command.append(word)
                continue
            for index in range(len(command) - 1):
                if command[index].endswith("pip") and command[index + 1] == "install":
                    found.append(command[index + 2 :])
            command = []
    return found


def installs_requirements(dockerfile: Dockerfile, requirements: str) -> bool:
    """Some `pip install` uses `-r` with a copy of `requirements` (or a file derived from it) and `-c` constraints."""
    copied = {dest for sources, dest in dockerfile.copies() for src in sources if src == requirements}
    copied |= {
        dest + os.path.basename(requirements)
        for sources, dest in dockerfile.copies()
        if requirements in sources and dest.endswith("/")
    }
    constraints = {dest for sources, dest in dockerfile.copies() if CONSTRAINTS in sources}
    constraints |= {
        dest + "constraints.txt"
        for sources, dest in dockerfile.copies()
        if CONSTRAINTS in sources and dest.endswith("/")
    }
    for arguments in pip_installs(dockerfile):
        pairs = dict(zip(arguments, arguments[1:], strict=False))
        requirement = pairs.get("-r", "")
        if requirement in copied and pairs.get("-c") in constraints:
            return True
    return False


def test_every_image_has_a_dockerfile():
    assert set(dockerfiles()) == {"base", "operator", "entrypoints", *PROGRAMS}


@pytest.mark.parametrize("image", ["base", "operator", "entrypoints", *PROGRAMS])
def test_image_runs_as_non_root_user(image):
    """hadolint (DL3002) fails a stage whose last USER is root; one without USER would run as root too."""
    users = [user.split(":")[0] for user in dockerfiles()[image].values("USER", final_stage=True)]
    assert users, f"images/{image}/Dockerfile sets no USER: the container would run as root"
    if image != "operator":
        assert users[-1] == str(DEFAULT_USER), "pods run as the CRD's default runAsUser; the image must match"


@pytest.mark.parametrize("image", ["base", "operator", "entrypoints", *PROGRAMS])
def test_every_copied_file_exists(image):
    dockerfile = dockerfiles()[image]
    for sources, _destination in dockerfile.copies():
        for source in sources:
            assert (REPO / source).exists(), f"images/{image}/Dockerfile copies {source}, which does not exist"


@pytest.mark.parametrize("image", ["base", "operator", *PROGRAMS])
def test_dockerignore_keeps_every_copied_file(image):
    """A pattern such as **/manifests would silently drop operator/kubetrain/manifests/ from the image."""
    ignore = REPO / ".dockerignore"
    patterns = [p.strip() for p in ignore.read_text().splitlines() if p.strip() and not p.startswith("#")]
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for sources, _destination in dockerfiles()[image].copies():
        for source in sources:
            for path in [p for p in tracked if p == source or p.startswith(source.rstrip("/") + "/")]:
                parts = path.split("/")
                for prefix in ("/".join(parts[: n + 1]) for n in range(len(parts))):
                    hits = [pattern for pattern in patterns if _ignore_regex(pattern).fullmatch(prefix)]
                    assert not hits, f"{ignore.name} of {image} excludes {path} (pattern {hits[0]})"


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus **) as a regex over slash-separated paths."""
    parts = re.split(r"(\*\*/?|\*|\?)", pattern.strip("/"))
    wildcards = {"**/": "(.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wildcards.get(part, re.escape(part)) for part in parts))


def test_base_installs_the_pinned_job_requirements_and_builds_horovod_like_ci():
    base = dockerfiles()["base"]
    assert installs_requirements(base, JOBS_REQUIREMENTS), (
        "base must pip install -r jobs/requirements.txt -c constraints"
    )
    runs = " ".join(base.values("RUN"))
    assert base.image_path_source("/opt/kubetrain/ci/install-horovod") == ".ci/install-horovod"
    assert "/opt/kubetrain/ci/install-horovod /opt/venv" in runs, "Horovod must be built by .ci/install-horovod"
    for tool in ("openmpi-bin", "libopenmpi-dev", "openssh-server", "openssh-client", "libnss-wrapper"):
        assert tool in runs


def test_base_gpu_variant_comes_from_a_build_argument_not_an_unused_stage():
    """The legacy builder builds every stage: a `FROM` of a CUDA image would be pulled even for the CPU image. The GPU
    variant is the same Dockerfile with the VARIANT build argument, on the same base image."""
    base = dockerfiles()["base"]
    assert [value.split()[0] for value in base.values("FROM")] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    assert "BASE_IMAGE=python:3.11-slim-bookworm" in base.values("ARG")
    assert any(value.startswith("VARIANT=cpu") for value in base.values("ARG"))
    documented = (IMAGES / "base" / "Dockerfile").read_text()
    assert "--build-arg VARIANT=gpu -t kubetrain/base:0.1.0-gpu" in documented


def test_base_gpu_variant_installs_tensorflows_cuda_pins_with_the_job_requirements():
    """tensorflow[and-cuda] at requirements.txt's version, never tensorflow-cpu beside it, in the same pip install as
    jobs/requirements-gpu.txt: pip refuses the build when the file's pins differ from the extra's."""
    base = dockerfiles()["base"]
    runs = " ".join(base.values("RUN"))
    assert "s/^tensorflow-cpu==/tensorflow[and-cuda]==/" in runs
    gpu_requirements = base.image_path_source("/opt/kubetrain/ci/jobs/requirements-gpu.txt")
    assert gpu_requirements == "jobs/requirements-gpu.txt"
    assert "set -- -r /opt/kubetrain/ci/jobs/requirements-gpu.txt" in runs
    assert any(arguments[-1] == "$@" and "/opt/kubetrain/ci/jobs/requirements.txt" in arguments
               for arguments in pip_installs(base))
    tensorflow = next(line for line in (REPO / JOBS_REQUIREMENTS).read_text().splitlines()
                      if line.startswith("tensorflow-cpu=="))
    pins = [line for line in (REPO / gpu_requirements).read_text().splitlines() if line and not line.startswith("#")]
    assert tensorflow == "tensorflow-cpu==2.15.1", "the CUDA pins are TensorFlow 2.15.1's: update both files"
    assert pins and all(re.fullmatch(r"nvidia-[a-z0-9-]+-cu12==[0-9.]+", pin) for pin in pins), pins


def test_base_ships_no_compiler_or_headers():
    """Horovod is compiled in the builder stage; what every node pulls holds only what runs."""
    packages = " ".join(dockerfiles()["base"].values("RUN", final_stage=True))
    for build_only in ("g++", "cmake", " make", "libopenmpi-dev", "python3-dev", "nvcc"):
        assert build_only not in packages, f"the final stage of images/base installs {build_only.strip()}"
    copied = dockerfiles()["base"].values("COPY", final_stage=True)
    assert "--from=builder /opt/venv /opt/venv" in copied


def test_operator_installs_the_pinned_operator_requirements():
    operator = dockerfiles()["operator"]
    assert installs_requirements(operator, OPERATOR_REQUIREMENTS)
    installs = pip_installs(operator)
    assert ["-q", "--no-cache-dir", "--no-deps", "/opt/kubetrain/src/operator"] in installs


def test_operator_entrypoint_module_exists():
    entrypoint = json.loads(dockerfiles()["operator"].values("ENTRYPOINT")[-1])
    module = entrypoint[entrypoint.index("-m") + 1]
    path = REPO / "operator" / Path(*module.split("."))
    assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), f"no module {module} in operator/"


@pytest.mark.parametrize("program", PROGRAMS)
def test_program_image_builds_on_base_and_installs_jobs_without_new_dependencies(program):
    dockerfile = dockerfiles()[program]
    args = dict(value.split("=", 1) for value in dockerfile.values("ARG") if "=" in value)
    assert dockerfile.values("FROM")[0] == "${BASE_IMAGE}"
    assert args["BASE_IMAGE"].startswith("kubetrain/base:")
    assert dockerfile.image_path_source("/opt/kubetrain/src/jobs/") == "jobs/"
    assert ["-q", "--no-cache-dir", "--no-deps", "/opt/kubetrain/src/jobs"] in pip_installs(dockerfile)
    assert (REPO / "jobs" / program / "__init__.py").is_file()
    cmd = json.loads(dockerfile.values("CMD")[-1])
    assert cmd[cmd.index("-m") + 1] == program


def _pod_specs() -> list[dict]:
    job = parse_job(
        {
            "kind": "DistributedTraining",
            "metadata": {"name": "demo"},
            "spec": {"image": "registry.example.com/team/own:1", "command": ["python", "-m", "mnist"], "workers": 2},
        }
    )
    return [build_worker_pod(job, 0)["spec"], build_launcher_job(job)["spec"]["template"]["spec"]]


@pytest.mark.parametrize("role", ["worker", "launcher"])
def test_pods_run_entrypoints_the_init_container_copies_from_the_entrypoints_image(role):
    """Any image runs the entrypoints: the init container copies ENTRYPOINTS out of kubetrain/entrypoints into a volume
    the main container mounts at ENTRYPOINTS, and each command there is a shipped, executable file."""
    spec = _pod_specs()[["worker", "launcher"].index(role)]
    (init,) = spec["initContainers"]
    main = spec["containers"][0]
    assert init["image"] == ENTRYPOINTS_IMAGE
    assert init["command"][:3] == ["/bin/busybox", "cp", "-R"] and init["command"][3] == f"{ENTRYPOINTS}/."
    (target,) = init["volumeMounts"]
    assert init["command"][4].rstrip("/") == target["mountPath"]
    mounted = [m for m in main["volumeMounts"] if m["name"] == target["name"]]
    assert mounted == [{"name": target["name"], "mountPath": ENTRYPOINTS, "readOnly": True}]
    entrypoints = dockerfiles()["entrypoints"]
    command = main["command"][0]
    source = entrypoints.image_path_source(command)
    assert source and (REPO / source).is_file(), f"pods run {command} but kubetrain/entrypoints does not ship it"
    assert os.stat(REPO / source).st_mode & stat.S_IXOTH, f"{source} is not executable by any uid"
    assert json.loads(entrypoints.values("ENTRYPOINT")[-1]) == ["/bin/busybox"]


def test_entrypoints_image_is_tagged_with_the_charts_app_version():
    assert ENTRYPOINTS_IMAGE == image_name("entrypoints")  # kubetrain/entrypoints:<the chart's appVersion>


ENTRYPOINT_SCRIPTS = sorted(p for p in (IMAGES / "entrypoints").rglob("*") if p.is_file() and p.name != "Dockerfile")


@pytest.mark.parametrize("script", ENTRYPOINT_SCRIPTS, ids=lambda p: str(p.relative_to(IMAGES)))
def test_entrypoint_scripts_parse(script):
    """The wrappers are POSIX sh (an image without bash gets a message), the launcher's Python helpers Python
    (stdlib only: the image's Python runs them), the rest bash."""
    if script.suffix == ".py":
        compile(script.read_text(), str(script), "exec")
        return
    shell = "sh" if script.parent.name == "entrypoints" else "bash"
    result = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
