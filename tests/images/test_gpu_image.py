"""The GPU images (`images/build.sh base-gpu cifar_mixup-gpu ...`) as a user checks them on a machine without a GPU:
TensorFlow built for CUDA 12.2 and cuDNN 8, every CUDA library found by its soname from the image's own wheels with
no variable set (also in ranks that mpirun starts over ssh), Horovod's build as docs/gpus.md states it, no compiler
or CUDA headers, and a 2-rank cifar_mixup job that trains on the CPU."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from docker_pods import docker
from test_job import start_job, start_workers

from tests.support.job_on_hosts import job_body
from tests.support.programs import PROGRAMS

# The CUDA libraries TensorFlow loads, by soname: runtime, cuBLAS(Lt), cuDNN, cuFFT, cuRAND, cuSOLVER, cuSPARSE, NCCL.
SONAMES = ("libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcudnn.so.8", "libcufft.so.11",
           "libcurand.so.10", "libcusolver.so.11", "libcusparse.so.12", "libnccl.so.2")
# Loads each by soname alone, as TensorFlow does, and prints the file the dynamic linker chose for it.
LOAD_BY_SONAME = f"""
import ctypes, json, os
for soname in {SONAMES!r}:
    ctypes.CDLL(soname)
files = {{os.path.basename(line.split()[-1]): line.split()[-1] for line in open("/proc/self/maps") if ".so" in line}}
print("loaded " + json.dumps({{soname: os.path.realpath(files.get(soname, "?")) for soname in {SONAMES!r}}}))
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`docker run --rm ARGS`: options, the image, its command."""
    return docker("run", "--rm", *args, check=False, timeout=300)


def loaded_files(output: str) -> list[dict[str, str]]:
    return [json.loads(files) for files in re.findall(r"^.*?loaded (\{.*\})$", output, re.M)]


def assert_from_the_wheels(files: dict[str, str]) -> None:
    assert set(files) == set(SONAMES), files
    elsewhere = {soname: path for soname, path in files.items() if "/site-packages/nvidia/" not in path}
    assert not elsewhere, f"not from the image's CUDA wheels: {elsewhere}"


@pytest.mark.parametrize("image", ["base", *PROGRAMS])
def test_tensorflow_is_the_cuda_12_2_cudnn_8_build(gpu_images, image):
    check = ("import json, tensorflow as tf; info = tf.sysconfig.get_build_info(); "
             "print(json.dumps([tf.test.is_built_with_cuda(), info['cuda_version'], info['cudnn_version']]))")
    result = run(gpu_images[image], "python", "-c", check)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [True, "12.2", "8"], result.stdout


def test_cuda_libraries_and_horovods_ops_resolve_with_no_environment(gpu_images):
    script = LOAD_BY_SONAME + """
import glob, subprocess
for library in glob.glob("/opt/venv/lib/python3*/site-packages/horovod/tensorflow/mpi_lib*.so"):
    print(subprocess.run(["/usr/bin/ldd", library], capture_output=True, text=True).stdout)
import horovod.tensorflow
print("imported", horovod.tensorflow.__name__)
"""
    # env -i: none of the image's ENV, which sshd does not pass on to the ranks it starts
    result = run("--entrypoint", "env", gpu_images["base"], "-i", "/opt/venv/bin/python", "-c", script)
    assert result.returncode == 0, result.stderr
    [files] = loaded_files(result.stdout)
    assert_from_the_wheels(files)
    # Horovod's op library for TensorFlow: only TensorFlow's own libraries are left to `import tensorflow`, which
    # loads them first (ldd cannot know that); then the import itself.
    unresolved = set(re.findall(r"^\s*(\S+) => not found$", result.stdout, re.M))
    assert "libmpi.so.40 =>" in result.stdout, f"no ldd of Horovod's op library:\n{result.stdout}"
    assert unresolved == {"libtensorflow_framework.so.2", "libtensorflow_cc.so.2"}, result.stdout
    assert "imported horovod.tensorflow" in result.stdout, result.stdout


def test_ranks_that_mpirun_starts_over_ssh_find_the_cuda_libraries(on_docker, gpu_images):
    body = job_body("cudalibs", ["python", "-c", LOAD_BY_SONAME])
    body["spec"]["image"] = gpu_images["base"]
    job = on_docker(body)
    for index in range(2):
        job.start_worker(index).wait_for_log("Server listening")
    launcher = job.start_launcher()
    assert launcher.wait(timeout=180) == 0, launcher.logs()
    ranks = loaded_files(launcher.logs())
    assert len(ranks) == 2, launcher.logs()
    for files in ranks:
        assert_from_the_wheels(files)


def test_horovod_check_build_lists_what_docs_gpus_md_says(gpu_images):
    """TensorFlow with MPI and Gloo; no NCCL, since no CUDA 12 nvcc can be installed to build it (docs/gpus.md)."""
    result = run(gpu_images["base"], "horovodrun", "--check-build")
    assert result.returncode == 0, result.stderr
    operations = result.stdout.split("Available Tensor Operations:")[-1]
    marks = {name: mark for mark, name in re.findall(r"^\s*\[(.)\] (\w+)\s*$", operations, re.M)}
    assert marks == {"NCCL": " ", "DDL": " ", "CCL": " ", "MPI": "X", "Gloo": "X"}, result.stdout
    assert re.search(r"^\s*\[X\] TensorFlow\s*$", result.stdout, re.M), result.stdout


def test_gpu_image_ships_no_compiler_and_no_cuda_headers(gpu_images):
    """Horovod is compiled in the builder stage; nodes pull the CUDA libraries, not what builds against them."""
    command = ("command -v g++ gcc cc cmake mpicc nvcc; "
               "find /opt/venv/lib/python3*/site-packages/nvidia -name '*.h' | head -n 5")
    result = run("--entrypoint", "sh", gpu_images["base"], "-c", command)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{gpu_images['base']} contains {result.stdout.split()}"


def test_two_ranks_train_cifar_mixup_in_the_gpu_image_on_cpus(on_docker, gpu_images, digits):
    job = start_job(on_docker, gpu_images, digits, "gpudigits", epochs=3, wait_seconds=60)
    start_workers(job)
    launcher = job.start_launcher()
    code = launcher.wait(timeout=600)
    log = launcher.logs()
    assert code == 0, log
    assert "on all 2 ranks" in log, log
    accuracy = re.search(r"held-out accuracy (\d\.\d+)", log)
    assert accuracy and float(accuracy.group(1)) > 0.1, log  # better than chance on 10 classes
    assert (job.checkpoint_dir / "ckpt-000003.h5").is_file()
