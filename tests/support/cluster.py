"""A real Kubernetes control plane on loopback for tests.

`ControlPlane.start(workdir)` runs etcd, kube-apiserver (TLS, client certificates, Node+RBAC authorization, default
admission), kube-controller-manager, kube-scheduler and kwok from the binaries tests/controlplane/build.sh builds,
then registers fake GPU nodes. kwok plays the pod lifecycles in kwok-stages.yaml: a scheduled pod becomes Running and
Ready and stays so until the test decides its outcome with `set_pod_outcome`; an image under `unpullable.invalid/`
never pulls (container waiting with ErrImagePull); deleted pods go away, and kwok-guard.yaml keeps kwok's last DELETE
of a pod from reaching a new pod of the same name (the kubelet's delete is conditional on the pod's uid; kwok's is not).

    plane = ControlPlane.start(tmp_path)
    try:
        plane.kubectl("create", "namespace", "demo")
    finally:
        plane.stop()
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import datetime
import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import tests.support.gang_schedulers as gang
import tests.support.kueue_harness as kueue

HERE = Path(__file__).resolve().parents[1] / "controlplane"  # its build scripts and kwok stages
BUILD_SCRIPT = HERE / "build.sh"
STAGES_FILE = HERE / "kwok-stages.yaml"
KWOK_GUARD_FILE = HERE / "kwok-guard.yaml"  # kwok may delete only terminating pods (why: in the file)
KWOK_USER = "kwok"  # kwok's own identity, which that guard names
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# Mirrored in kwok-stages.yaml.
OUTCOME_ANNOTATION_PREFIX = "kwok.kubetrain.dev/"
LINGER_ANNOTATION = OUTCOME_ANNOTATION_PREFIX + "linger"  # kwok-stages.yaml's pod-delete skips a pod that has it
UNPULLABLE_IMAGE_PREFIX = "unpullable.invalid/"
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
GPU_RESOURCE = "nvidia.com/gpu"

SERVICE_CIDR = "10.96.0.0/16"
FRONT_PROXY_NAME = "front-proxy-client"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_NODES = (("kwok-gpu-0", 4), ("kwok-gpu-1", 4))

START_TIMEOUT = 300.0  # seconds; the first start on a busy 2-core machine is slow
WAIT_TIMEOUT = 120.0

T = TypeVar("T")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or driven; the message says which part and where its log is."""


class KubectlError(ControlPlaneError):
    """kubectl exited non-zero; `stderr` holds its message."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


def wait_until(condition: Callable[[], T], timeout: float = WAIT_TIMEOUT, interval: float = 0.5,
               message: str = "condition") -> T:
    """Polls `condition` until it returns something truthy and returns that; raises TimeoutError naming `message`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {message}; last value: {last!r}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------------------------------
# Binaries and kubectl


def binary_dir() -> Path:
    """Where build.sh put the binaries (KUBETRAIN_CONTROLPLANE_BIN overrides); fails with the command to run."""
    override = os.environ.get("KUBETRAIN_CONTROLPLANE_BIN")
    if override:
        directory = Path(override)
    else:
        result = subprocess.run([str(BUILD_SCRIPT), "--print-bin-dir"], capture_output=True, text=True, check=True)
        directory = Path(result.stdout.strip())
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"control plane binaries missing in {directory}: {', '.join(missing)}; "
            f"build them with: {BUILD_SCRIPT.relative_to(HERE.parents[1])}"
        )
    return directory


def kubectl_binary() -> Path:
    """The kubectl that .ci/install-kubetools unpacks into the kubetrain cache."""
    cache = Path(os.environ.get("KUBETRAIN_CACHE", Path.home() / ".cache" / "kubetrain"))
    path = cache / "bin" / "kubectl"
    if not os.access(path, os.X_OK):
        raise ControlPlaneError(f"kubectl not found at {path}; install it: .ci/install-kubetools .venv {path.parent}")
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Certificates (pure: build keys and certificates, then write them)


@dataclass(frozen=True)
class Credential:
    """A PEM certificate and key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every certificate and key the control plane needs."""

    ca: Credential
    apiserver: Credential
    admin: Credential
    controller_manager: Credential
    scheduler: Credential
    kwok: Credential
    front_proxy: Credential
    service_account_key: Path
    service_account_pub: Path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _certificate(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
                 issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server_names: Iterable[str] = (),
                 client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    names: list[x509.GeneralName] = []
    for name in server_names:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            names.append(x509.DNSName(name))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _write_credential(directory: Path, stem: str, cert: x509.Certificate,
                      key: ec.EllipticCurvePrivateKey) -> Credential:
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return Credential(cert=_write(directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644),
                      key=_write(directory / f"{stem}.key", key_pem))


def write_pki(directory: Path) -> Pki:
    """Creates a CA, the API server's serving certificate, client certificates and the service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate(_name("kubetrain-test-ca"), ca_key, None, ca_key, ca=True)
    service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
    server_names = ["127.0.0.1", "localhost", service_ip, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local"]

    def issue(stem: str, subject: x509.Name, **kwargs: Any) -> Credential:
        key = ec.generate_private_key(ec.SECP256R1())
        return _write_credential(directory, stem, _certificate(subject, key, ca_cert, ca_key, **kwargs), key)

    service_account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return Pki(
        ca=_write_credential(directory, "ca", ca_cert, ca_key),
        apiserver=issue("apiserver", _name("kube-apiserver"), server_names=server_names),
        admin=issue("admin", _name("kubetrain-admin", "system:masters"), client=True),
        controller_manager=issue("controller-manager", _name("system:kube-controller-manager"), client=True),
        scheduler=issue("scheduler", _name("system:kube-scheduler"), client=True),
        kwok=issue("kwok", _name(KWOK_USER, "system:masters"), client=True),
        front_proxy=issue("front-proxy-client", _name(FRONT_PROXY_NAME), client=True),
        service_account_key=_write(directory / "sa.key", service_account_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())),
        service_account_pub=_write(directory / "sa.pub", service_account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo), 0o644),
    )


def write_self_signed(directory: Path, host: str) -> Credential:
    """A self-signed serving certificate for `host` (an IP or DNS name) as `tls.crt` and `tls.key` in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    return _write_credential(directory, "tls", _certificate(_name(host), key, None, key, server_names=[host]), key)


def kubeconfig(server: str, ca: Path, user: str, credential: Credential) -> dict[str, Any]:
    """A self-contained kubeconfig (certificates embedded) for one user of the API server at `server`."""

    def embed(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubetrain-test",
                      "cluster": {"server": server, "certificate-authority-data": embed(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": embed(credential.cert),
                                          "client-key-data": embed(credential.key)}}],
        "contexts": [{"name": "kubetrain-test", "context": {"cluster": "kubetrain-test", "user": user}}],
        "current-context": "kubetrain-test",
    }


def node_manifest(name: str, gpus: int, cpu: str, memory: str, pods: int = 110) -> dict[str, Any]:
    """A fake node that kwok manages, advertising `gpus` nvidia.com/gpu in capacity and allocatable."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), GPU_RESOURCE: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION[0]: FAKE_NODE_ANNOTATION[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "type": "kwok"},
        },
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def outcome_annotations(phase: str, reason: str | None, exit_code: int | None, message: str | None,
                        pod_reason: str | None) -> dict[str, str]:
    """The annotations the pod-outcome stage turns into a terminal pod phase and terminated containers."""
    if phase not in ("Succeeded", "Failed"):
        raise ValueError(f"phase must be 'Succeeded' or 'Failed', got {phase!r}")
    if exit_code is None:
        exit_code = 0 if phase == "Succeeded" else 1
    if (phase == "Succeeded") != (exit_code == 0):
        raise ValueError(f"exit_code {exit_code} does not fit phase {phase}: Succeeded needs 0, Failed non-zero")
    annotations = {
        "phase": phase,
        "reason": reason or ("Completed" if phase == "Succeeded" else "Error"),
        "exit-code": str(exit_code),
    }
    if message:
        annotations["message"] = message
    if pod_reason:
        annotations["pod-reason"] = pod_reason
    return {OUTCOME_ANNOTATION_PREFIX + key: value for key, value in annotations.items()}


# ---------------------------------------------------------------------------------------------------------------------
# Processes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel kills it if the thread that started it (keep that the main thread)
    dies without calling stop()."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Process:
    """One control-plane component and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise ControlPlaneError(f"{self.name} exited with code {code}; log {self.log}:\n{self.tail()}")

    def stop(self, grace: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.popen.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


def _spawn(name: str, command: list[str], logs: Path) -> Process:
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=_die_with_parent)
    return Process(name, popen, log)


def _https_status(url: str, context: ssl.SSLContext) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as error:
        return 0, str(error)


# ---------------------------------------------------------------------------------------------------------------------
# The control plane


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, started by `ControlPlane.start`.

    Attributes: `workdir` (certificates, data, kubeconfigs, `logs/<component>.log`), `kubeconfig` (admin, group
    system:masters), `server` (https URL of the API server), `nodes` (fake nodes registered through this object).
    """

    def __init__(self, workdir: Path, bin_dir: Path, kubectl: Path) -> None:
        self.workdir = workdir
        self.bin_dir = bin_dir
        self.kubectl_path = kubectl
        self.logs = workdir / "logs"
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.kwok_kubeconfig = workdir / "kwok.kubeconfig"  # kwok's own user (KWOK_USER), which kwok-guard.yaml names
        self.server = ""
        self.nodes: list[str] = []
        self.processes: list[Process] = []

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    @classmethod
    def start(cls, workdir: Path | str, nodes: Iterable[tuple[str, int]] = DEFAULT_NODES,
              bin_dir: Path | None = None, gang_schedulers: Iterable[str] = (), kueue: bool = False) -> ControlPlane:
        """Starts every component under `workdir` and registers `nodes` as (name, gpus); returns when the API server
        is ready, the controllers and scheduler are healthy, the `default` ServiceAccount exists and every node is
        Ready. Anything started is stopped again if this fails. `gang_schedulers` (gang_schedulers.COSCHEDULING,
        .VOLCANO) also start, beside the default kube-scheduler (see `start_gang_scheduler`); so does Kueue if
        `kueue` (see `start_kueue`)."""
        workdir = Path(workdir).resolve()
        plane = cls(workdir, bin_dir or binary_dir(), kubectl_binary())
        atexit.register(plane.stop)
        try:
            plane._start()
            for scheduler in gang_schedulers:
                plane.start_gang_scheduler(scheduler)
            if kueue:
                plane.start_kueue()
            for name, gpus in nodes:
                plane.add_node(name, gpus=gpus)
        except BaseException:
            plane.stop()
            raise
        return plane

    def stop(self) -> None:
        """Stops every process this object started (newest first); safe to call more than once."""
        while self.processes:
            self.processes.pop().stop()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The current environment plus KUBECONFIG pointing at the admin kubeconfig, for subprocesses."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def _start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        pki = write_pki(self.workdir / "pki")
        etcd_url = self._start_etcd()
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        for user, credential, path in (
            ("kubetrain-admin", pki.admin, self.kubeconfig),
            ("system:kube-controller-manager", pki.controller_manager, self.workdir / "controller-manager.kubeconfig"),
            ("system:kube-scheduler", pki.scheduler, self.workdir / "scheduler.kubeconfig"),
            (KWOK_USER, pki.kwok, self.kwok_kubeconfig),
        ):
            _write(path, yaml.safe_dump(kubeconfig(self.server, pki.ca.cert, user, credential)).encode())
        self._start_apiserver(pki, etcd_url, port)
        self._start_controller_manager(pki)
        self._start_scheduler()
        self.kubectl("apply", f"--filename={KWOK_GUARD_FILE}")
        self._start_kwok()
        wait_until(lambda: self.exists("serviceaccount", "default", "default"), START_TIMEOUT,
                   message="the controller manager to create ServiceAccount default/default")

    def _spawn(self, name: str, *args: str) -> Process:
        process = _spawn(name, [str(self.bin_dir / name), *args], self.logs)
        self.processes.append(process)
        return process

    def _wait_healthy(self, process: Process, url: str, context: ssl.SSLContext) -> None:
        def healthy() -> bool:
            process.check_alive()
            status, _ = _https_status(url, context)
            return status == 200

        try:
            wait_until(healthy, START_TIMEOUT, interval=1.0, message=f"{process.name} at {url}")
        except TimeoutError as error:
            raise ControlPlaneError(f"{error}; log {process.log}:\n{process.tail()}") from None

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        process = self._spawn(
            "etcd",
            "--name=kubetrain-test",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=kubetrain-test=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true",  # throwaway data: skip fsync so a slow disk does not slow the tests
            "--log-level=warn",
        )

        def healthy() -> bool:
            process.check_alive()
            status, body = _https_status(f"{url}/health", ssl.create_default_context())
            return status == 200 and '"true"' in body

        try:
            wait_until(healthy, START_TIMEOUT, interval=0.5, message=f"etcd at {url}")
        except TimeoutError as error:
            raise ControlPlaneError(f"{error}; log {process.log}:\n{process.tail()}") from None
        return url

    def _start_apiserver(self, pki: Pki, etcd_url: str, port: int) -> None:
        process = self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            # Request-header authentication, as kubeadm sets it up: the controller manager and scheduler read this
            # CA for their own delegated authentication, and aggregated APIs would be proxied with this client.
            f"--requestheader-client-ca-file={pki.ca.cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_NAME}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy.cert}",
            f"--proxy-client-key-file={pki.front_proxy.key}",
            "--endpoint-reconciler-type=none",  # Endpoints may not hold a loopback address
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--profiling=false",
        )
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        context.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        self._wait_healthy(process, f"{self.server}/readyz", context)

    def _start_controller_manager(self, pki: Pki) -> None:
        config = self.workdir / "controller-manager.kubeconfig"
        port = free_port()
        process = self._spawn(
            "kube-controller-manager",
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--root-ca-file={pki.ca.cert}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--cluster-name=kubetrain-test",
            "--profiling=false",
            # kwok's node heartbeats lag on a loaded 2-core machine; a node briefly marked NotReady would flip every
            # pod on it to Ready=False for good (kwok does not replay the start stage), so give heartbeats an hour.
            "--node-monitor-grace-period=1h",
        )
        self._wait_healthy(process, f"https://127.0.0.1:{port}/healthz", _unverified_context())

    def _start_scheduler(self) -> None:
        config = self.workdir / "scheduler.kubeconfig"
        port = free_port()
        process = self._spawn(
            "kube-scheduler",
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--leader-elect=false",
            "--profiling=false",
        )
        self._wait_healthy(process, f"https://127.0.0.1:{port}/healthz", _unverified_context())

    def _start_kwok(self) -> None:
        self._spawn(
            "kwok",
            f"--kubeconfig={self.kwok_kubeconfig}",
            f"--config={STAGES_FILE}",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION[0]}={FAKE_NODE_ANNOTATION[1]}",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.240.0.1",
        )

    # -- gang schedulers (opt-in) -------------------------------------------------------------------------------------

    def start_gang_scheduler(self, scheduler: str, build_dir: Path | None = None) -> None:
        """Starts gang scheduler `scheduler` (gang_schedulers.COSCHEDULING or .VOLCANO, built by
        build-gang-schedulers.sh into `build_dir`) beside the default kube-scheduler: creates the CRDs it needs, then
        runs it as the admin (their RBAC is their charts' concern, not these tests'); returns when it is healthy and,
        for Volcano, its `default` Queue exists."""
        gang.check_scheduler(scheduler)
        directory = build_dir or gang.build_dir()
        missing = gang.missing_files(directory, scheduler)
        if missing:
            raise ControlPlaneError(
                f"{scheduler} scheduler files missing in {directory}: {', '.join(missing)}; build them with: "
                f"{gang.BUILD_SCRIPT.relative_to(HERE.parents[1])}")
        crds = [f"--filename={directory / 'crds' / crd}" for crd in gang.CRDS[scheduler]]
        self.kubectl("apply", "--server-side", *crds)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds, timeout=90)
        binaries = directory / "bin"
        if scheduler == gang.COSCHEDULING:
            self._start_coscheduling(binaries)
        else:
            self._start_volcano(binaries)

    def _spawn_binary(self, binary: Path, *args: str) -> Process:
        """Like `_spawn`, for a binary outside `bin_dir`."""
        process = _spawn(binary.name, [str(binary), *args], self.logs)
        self.processes.append(process)
        return process

    def _start_coscheduling(self, binaries: Path) -> None:
        controller, binary = (binaries / name for name in gang.BINARIES[gang.COSCHEDULING])
        probe = free_port()
        process = self._spawn_binary(
            controller,
            f"--kubeconfig={self.kubeconfig}",
            f"--metricsAddr=127.0.0.1:{free_port()}",  # never its default :8080
            f"--probeAddr=127.0.0.1:{probe}",
        )
        self._wait_healthy(process, f"http://127.0.0.1:{probe}/readyz", _unverified_context())

        config = _write(self.workdir / "scheduler-plugins.yaml",
                        yaml.safe_dump(gang.coscheduling_config(self.kubeconfig)).encode(), 0o644)
        port = free_port()
        process = self._spawn_binary(
            binary,
            f"--config={config}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--profiling=false",
        )
        self._wait_healthy(process, f"https://127.0.0.1:{port}/healthz", _unverified_context())

    def _start_volcano(self, binaries: Path) -> None:
        [binary] = (binaries / name for name in gang.BINARIES[gang.VOLCANO])
        config = _write(self.workdir / "volcano-scheduler.conf", gang.VOLCANO_SCHEDULER_CONF.encode(), 0o644)
        port = free_port()
        process = self._spawn_binary(
            binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--scheduler-name={gang.VOLCANO_SCHEDULER_NAME}",
            f"--scheduler-conf={config}",
            f"--default-queue={gang.VOLCANO_DEFAULT_QUEUE}",
            f"--feature-gates={gang.VOLCANO_FEATURE_GATES}",
            "--schedule-period=1s",
            "--leader-elect=false",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{port}",
            f"--listen-address=127.0.0.1:{free_port()}",  # metrics (off), never its default :8080
            "--cache-dumper=false",  # no dumps into /tmp on SIGUSR2
        )

        def ready() -> bool:
            process.check_alive()
            return self.exists("queue.scheduling.volcano.sh", gang.VOLCANO_DEFAULT_QUEUE)

        self._wait_healthy(process, f"http://127.0.0.1:{port}/healthz", _unverified_context())
        try:
            wait_until(ready, START_TIMEOUT, interval=1.0, message="vc-scheduler to create its default Queue")
        except TimeoutError as error:
            raise ControlPlaneError(f"{error}; log {process.log}:\n{process.tail()}") from None

    # -- Kueue (opt-in) -----------------------------------------------------------------------------------------------

    def start_kueue(self, build_dir: Path | None = None) -> None:
        """Starts Kueue (built by build-kueue.sh into `build_dir`; see kueue.py): creates its CRDs and its webhook
        configurations, which call it on 127.0.0.1 with a self-signed certificate, then runs it as the admin (its
        RBAC is its chart's concern, not these tests'); returns when it is ready and its pod webhook answers."""
        directory = build_dir or kueue.build_dir()
        missing = kueue.missing_files(directory)
        if missing:
            raise ControlPlaneError(
                f"Kueue files missing in {directory}: {', '.join(missing)}; build them with: "
                f"{kueue.BUILD_SCRIPT.relative_to(HERE.parents[1])}")
        crds = [f"--filename={crd}" for crd in kueue.crd_files(directory)]
        self.kubectl("apply", "--server-side", *crds)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds, timeout=90)
        self.kubectl("create", "--filename=-", input=json.dumps(kueue.orphan()))
        cert_dir = self.workdir / "kueue-certs"
        credential = write_self_signed(cert_dir, "127.0.0.1")
        port, health = free_port(), free_port()
        for manifest in kueue.webhook_configurations(directory / "webhooks", f"https://127.0.0.1:{port}",
                                                     credential.cert.read_bytes()):
            self.kubectl("apply", "--server-side", "--filename=-", input=json.dumps(manifest))
        config = kueue.configuration(port, cert_dir, health, free_port())
        config_file = _write(self.workdir / "kueue-config.yaml", yaml.safe_dump(config).encode(), 0o644)
        process = self._spawn_binary(directory / "bin" / kueue.BINARY, f"--config={config_file}",
                                     f"--kubeconfig={self.kubeconfig}")
        self._wait_healthy(process, f"http://127.0.0.1:{health}/readyz", _unverified_context())
        # Ready means its webhook server listens; the pod webhook is registered a little later.
        probe = json.dumps(kueue.probe_pod("default"))

        def gated() -> bool:
            process.check_alive()
            try:
                pod = json.loads(self.kubectl("create", "--dry-run=server", "--output=json", "--filename=-",
                                              input=probe))
            except KubectlError:
                return False
            return {"name": kueue.ADMISSION_GATE} in pod["spec"].get("schedulingGates", [])

        def orphan_collected() -> bool:
            return not self.exists("workloadpriorityclasses.kueue.x-k8s.io", kueue.ORPHAN)

        try:
            wait_until(gated, START_TIMEOUT, interval=1.0, message="Kueue's pod webhook to gate a queued pod")
            # Until the garbage collector watches Kueue's kinds (it looks for new ones every 30 s), a Workload
            # outlives its pods; once it does, deleting a group's pods deletes its Workload and frees its quota.
            wait_until(orphan_collected, START_TIMEOUT, interval=1.0,
                       message="the garbage collector to watch Kueue's kinds")
        except TimeoutError as error:
            raise ControlPlaneError(f"{error}; log {process.log}:\n{process.tail()}") from None

    # -- kubectl ------------------------------------------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, timeout: float = WAIT_TIMEOUT) -> str:
        """Runs kubectl as the admin against this control plane and returns its stdout; raises KubectlError."""
        command = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise KubectlError(args, result.returncode, result.stderr)
        return result.stdout

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object as a dict (`kubectl get -o json`); raises KubectlError if it does not exist."""
        scope = ["--namespace", namespace] if namespace else []
        return json.loads(self.kubectl("get", kind, name, *scope, "--output=json"))

    def apply(self, manifest: dict[str, Any] | str) -> str:
        """`kubectl apply` of a dict or YAML/JSON text."""
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self.kubectl("apply", "--filename=-", input=text)

    def user_kubeconfig(self, namespace: str, directory: Path) -> Path:
        """The admin kubeconfig with `namespace` as its current context's, written into `directory`: a user's, for
        commands that take the namespace from the kubeconfig as kubectl does."""
        kubeconfig = yaml.safe_load(self.kubeconfig.read_text())
        for context in kubeconfig["contexts"]:
            context["context"]["namespace"] = namespace
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        return path

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        scope = ["--namespace", namespace] if namespace else []
        return bool(self.kubectl("get", kind, name, *scope, "--ignore-not-found", "--output=name").strip())

    # -- fake nodes ---------------------------------------------------------------------------------------------------

    def add_node(self, name: str, gpus: int = 4, cpu: str = "32", memory: str = "128Gi",
                 timeout: float = START_TIMEOUT) -> dict[str, Any]:
        """Registers a fake node with `gpus` nvidia.com/gpu, waits until kwok reports it Ready and returns it."""
        manifest = node_manifest(name, gpus, cpu, memory)
        self.kubectl("create", "--filename=-", input=json.dumps(manifest))
        self.nodes.append(name)
        # The status is sent again through the status subresource in case kwok initialised it first.
        self.kubectl("patch", "node", name, "--subresource=status", "--type=merge",
                     f"--patch={json.dumps({'status': manifest['status']})}")

        def ready() -> dict[str, Any] | None:
            for process in self.processes:
                process.check_alive()
            node = self.get("node", name)
            conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            allocatable = node.get("status", {}).get("allocatable", {})
            return node if conditions.get("Ready") == "True" and allocatable.get(GPU_RESOURCE) == str(gpus) else None

        return wait_until(ready, timeout, message=f"node {name} to be Ready with {gpus} GPUs")

    def delete_node(self, name: str) -> None:
        """Deletes a fake node (its pods are then garbage-collected by the pod GC controller)."""
        self.kubectl("delete", "node", name, "--wait=true")
        if name in self.nodes:
            self.nodes.remove(name)

    # -- pod outcomes -------------------------------------------------------------------------------------------------

    def hold_deletion(self, namespace: str, pod: str, held: bool = True) -> None:
        """While held, kwok leaves a deleted pod terminating, as a node slow to stop it would; then it goes."""
        value = f"{LINGER_ANNOTATION}=true" if held else f"{LINGER_ANNOTATION}-"
        self.kubectl("annotate", "pod", pod, "--namespace", namespace, "--overwrite", value)

    def set_pod_outcome(self, namespace: str, pod: str, phase: str = "Succeeded", reason: str | None = None,
                        exit_code: int | None = None, message: str | None = None,
                        pod_reason: str | None = None) -> None:
        """Makes a running pod finish: kwok sets `phase` and terminates every container with `reason` (default
        Completed/Error) and `exit_code` (default 0/1); `pod_reason` (e.g. Evicted) also sets status.reason."""
        annotations = outcome_annotations(phase, reason, exit_code, message, pod_reason)
        self.kubectl("annotate", "pod", pod, "--namespace", namespace, "--overwrite",
                     *(f"{key}={value}" for key, value in annotations.items()))


def _unverified_context() -> ssl.SSLContext:
    # Health endpoints of the controller manager and scheduler serve self-signed certificates made at start.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def wait_for_free_gpus(plane: ControlPlane) -> None:
    """Until no unfinished pod holds a GPU: an earlier test's namespace may still be going away."""

    def free() -> bool:
        pods = json.loads(plane.kubectl("get", "pods", "--all-namespaces", "--output=json"))["items"]
        return not [p for p in pods if p["spec"].get("nodeName")
                    and p["status"].get("phase") not in ("Succeeded", "Failed")
                    and any(GPU_RESOURCE in c.get("resources", {}).get("limits", {}) for c in p["spec"]["containers"])]

    wait_until(free, message="the GPUs of earlier tests' pods to be released")


@contextmanager
def fresh_namespace(plane: ControlPlane, test_name: str) -> Iterator[str]:
    """A new namespace named after the test, usable at once (its `default` ServiceAccount exists); deleted after."""
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", name)
    wait_until(lambda: plane.kubectl("get", "serviceaccount", "default", "--namespace", name,
                                     "--ignore-not-found", "--output=name").strip(),
               message=f"ServiceAccount {name}/default")
    try:
        yield name
    finally:
        plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")
