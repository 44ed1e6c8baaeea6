"""Pure builders: the objects a user finds in the cluster for one DistributedTraining."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key
from dtr_bodies import training

from kubetrain.api import parse_job
from kubetrain.cli import child_objects
from kubetrain.keys import generate_job_keys
from kubetrain.manifests.env import job_environment
from kubetrain.manifests.hosts import build_hosts_configmap, hostfile
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.service import build_ready_endpoints, build_ready_service, build_service
from kubetrain.manifests.ssh import build_ssh_secret

GOLDEN = Path(__file__).parent / "golden"


def every_child(body: dict[str, Any]) -> list[dict[str, Any]]:
    return child_objects(parse_job(body), generate_job_keys())


@pytest.mark.parametrize(
    ("workers", "resources", "slots", "expected"),
    [
        (2, {"gpusPerWorker": 1}, None, ["cifar-worker-0.cifar.ml.svc slots=1", "cifar-worker-1.cifar.ml.svc slots=1"]),
        (1, {"gpusPerWorker": 4}, None, ["cifar-worker-0.cifar.ml.svc slots=4"]),
        (3, {}, 2, [f"cifar-worker-{i}.cifar.ml.svc slots=2" for i in range(3)]),
    ],
)
def test_hostfile_lists_every_worker_with_its_slots(
    workers: int, resources: dict[str, Any], slots: int | None, expected: list[str]
) -> None:
    overrides: dict[str, Any] = {"workers": workers, "resources": resources}
    if slots:
        overrides["slotsPerWorker"] = slots
    job = parse_job(training(**overrides))
    assert hostfile(job).splitlines() == expected
    assert list(build_hosts_configmap(job)["data"]) == ["hostfile"]  # elastic-hosts only for an elastic job


def test_an_elastic_job_lists_every_host_it_may_grow_to_and_gets_a_ready_only_service() -> None:
    job = parse_job(training(workers=2, resources={}, slotsPerWorker=2, elastic={"minWorkers": 1, "maxWorkers": 3}))
    data = build_hosts_configmap(job)["data"]
    assert data["hostfile"].splitlines() == [f"cifar-worker-{i}.cifar.ml.svc slots=2" for i in range(2)]
    assert data["elastic-hosts"].splitlines() == [f"cifar-worker-{i}.cifar.ml.svc:2" for i in range(3)]
    ready = build_ready_service(job)
    assert ready is not None and ready["metadata"]["name"] == "cifar-ready"
    assert "publishNotReadyAddresses" not in ready["spec"]  # Ready workers only
    assert ready["spec"]["selector"] is None, "no selector: the operator lists the Ready workers it created itself"
    endpoints = build_ready_endpoints(job, [("cifar-worker-1", "u1", "10.0.0.2"), ("cifar-worker-0", "u0", "10.0.0.1")])
    assert endpoints["metadata"]["labels"]["kubernetes.io/service-name"] == "cifar-ready"
    assert [(e["hostname"], e["addresses"], e["targetRef"]["uid"]) for e in endpoints["endpoints"]] == [
        ("cifar-worker-0", ["10.0.0.1"], "u0"), ("cifar-worker-1", ["10.0.0.2"], "u1")]
    assert build_service(job)["spec"]["publishNotReadyAddresses"] is True  # the pods' own names from their start
    env = job_environment(job)
    assert env["KUBETRAIN_READY_SERVICE"] == "cifar-ready.ml.svc"
    assert (env["KUBETRAIN_ELASTIC_MIN_WORKERS"], env["KUBETRAIN_ELASTIC_MAX_WORKERS"]) == ("1", "3")
    assert env["KUBETRAIN_ELASTIC_HOSTS"] == "/etc/kubetrain/hosts/elastic-hosts"
    assert "ServerAliveInterval 5\n" in build_ssh_secret(job, generate_job_keys())["stringData"]["ssh_config"]
    with_launcher = parse_job(training(workers=1, launcher={"runAsWorker": True}, elastic={"maxWorkers": 2}))
    assert build_hosts_configmap(with_launcher)["data"]["elastic-hosts"].splitlines() == [
        "cifar-launcher:1", "cifar-worker-0.cifar.ml.svc:1", "cifar-worker-1.cifar.ml.svc:1"]
    static = parse_job(training())
    assert build_ready_service(static) is None and "KUBETRAIN_READY_SERVICE" not in job_environment(static)


@pytest.mark.parametrize(("gpus", "limit"), [(0, None), (1, 1), (8, 8)])
def test_gpus_are_limits_on_workers_only(gpus: int, limit: int | None) -> None:
    job = parse_job(training(resources={"gpusPerWorker": gpus, "cpu": "4", "memory": "16Gi"}))
    worker = build_worker_pod(job, 0)["spec"]["containers"][0]
    assert worker["resources"]["limits"].get("nvidia.com/gpu") == limit
    assert worker["resources"]["requests"] == {"cpu": "4", "memory": "16Gi"}
    assert "nvidia.com/gpu" not in worker["resources"].get("requests", {})
    launcher = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in str(launcher["resources"])
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""} in launcher["env"]


@pytest.mark.parametrize(("gpus", "slots", "per_rank"), [(0, None, "0"), (1, None, "1"), (4, None, "1"), (4, 2, "2"),
                                                      (3, 2, "1")])
def test_every_pod_says_how_many_gpus_each_rank_holds_and_which_image_it_runs(gpus: int, slots: int | None,
                                                                              per_rank: str) -> None:
    """trainlib reads the names it stops a rank by (trainlib.gpus) from the pods the operator builds."""
    from trainlib.gpus import GPUS_ENV, IMAGE_ENV

    spec: dict[str, Any] = {"resources": {"gpusPerWorker": gpus}}
    if slots is not None:
        spec["slotsPerWorker"] = slots
    job = parse_job(training(launcher={"runAsWorker": True}, **spec))
    worker = build_worker_pod(job, 0)["spec"]["containers"][0]
    launcher = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]
    for container in (worker, launcher):
        env = {entry["name"]: entry.get("value") for entry in container["env"]}
        assert (env[GPUS_ENV], env[IMAGE_ENV]) == (per_rank, "kubetrain/cifar-mixup:0.1.0")
        assert GPUS_ENV in env["KUBETRAIN_FORWARD_ENV"].split(), "the launcher forwards it to every rank"


def test_every_child_is_owned_and_labelled() -> None:
    for obj in every_child(training()):
        meta = obj["metadata"]
        assert meta["namespace"] == "ml"
        assert meta["labels"]["kubetrain.dev/job-name"] == "cifar", obj["kind"]
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "kubetrain.dev/v1alpha1",
                "kind": "DistributedTraining",
                "name": "cifar",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_child_names_are_deterministic_and_unique() -> None:
    names = [(o["kind"], o["metadata"]["name"]) for o in every_child(training(workers=3))]
    assert len(names) == len(set(names))
    assert ("Pod", "cifar-worker-2") in names and ("Job", "cifar-launcher") in names
    assert names == [(o["kind"], o["metadata"]["name"]) for o in every_child(training(workers=3))]


def test_worker_pod_is_reachable_by_its_hostfile_name() -> None:
    job = parse_job(training())
    pod = build_worker_pod(job, 1)
    service = build_service(job)
    assert pod["spec"]["hostname"] == "cifar-worker-1" and pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert all(pod["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())
    probe = pod["spec"]["containers"][0]["readinessProbe"]
    assert probe["tcpSocket"]["port"] == 2222


def test_volumes_mount_data_read_only_and_checkpoints_writable() -> None:
    job = parse_job(training())
    spec = build_worker_pod(job, 0)["spec"]
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts["data"]["readOnly"] is True and volumes["data"]["persistentVolumeClaim"]["claimName"] == "hdf5-data"
    assert "readOnly" not in mounts["checkpoint"] or mounts["checkpoint"]["readOnly"] is False
    assert volumes["checkpoint"]["persistentVolumeClaim"] == {"claimName": "checkpoints", "readOnly": False}
    assert volumes["ssh"]["secret"]["defaultMode"] == 0o400
    assert job_environment(job)["KUBETRAIN_CHECKPOINT_DIR"] == "/checkpoints/ml/cifar"


def test_env_each_pod_resolves_for_itself_is_never_forwarded_by_the_launcher() -> None:
    env = [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
           {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
           {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
           {"name": "SEED", "value": "1"}]
    contract = job_environment(parse_job(training(env=env)))
    assert contract["KUBETRAIN_POD_ENV"] == "NODE CPUS TOKEN"
    forwarded = contract["KUBETRAIN_FORWARD_ENV"].split()
    assert {"MODE", "SEED", "KUBETRAIN_POD_ENV"} <= set(forwarded) and not {"NODE", "CPUS", "TOKEN"} & set(forwarded)
    assert "KUBETRAIN_POD_ENV" not in job_environment(parse_job(training(env=env[3:])))


def test_open_mpi_jobs_consider_no_ofi_provider_unless_their_env_names_one() -> None:
    """Open MPI 4.1's OFI components can deadlock MPI_Init (kubetrain.contract.OPEN_MPI_ENV); a job may opt back in."""
    variable = "OMPI_MCA_opal_common_ofi_provider_include"
    default = job_environment(parse_job(training()))
    assert default[variable] == "none" and variable in default["KUBETRAIN_FORWARD_ENV"].split()
    chosen = parse_job(training(env=[{"name": variable, "value": "efa"}]))
    assert variable not in job_environment(chosen)
    pod_env = build_worker_pod(chosen, 0)["spec"]["containers"][0]["env"]
    assert [entry["value"] for entry in pod_env if entry["name"] == variable] == ["efa"]
    mpich = parse_job(training(mpi={"implementation": "MPICH"}))
    assert variable not in job_environment(mpich)


def test_environment_contract_is_forwarded_to_every_rank() -> None:
    job = parse_job(training(env=[{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}]))
    env = job_environment(job)
    forwarded = env["KUBETRAIN_FORWARD_ENV"].split()
    assert set(env) <= set(forwarded)
    assert "TF_CPP_MIN_LOG_LEVEL" in forwarded and "KUBERNETES_SERVICE_HOST" in forwarded
    assert env["KUBETRAIN_NUM_PROCESSES"] == "2"
    launcher = build_launcher_job(job)["spec"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == [
        "/opt/kubetrain/entrypoints/launcher",
        "python",
        "-m",
        "cifar_mixup",
        "--epochs",
        "30",
    ]


def test_ssh_secret_holds_a_fresh_valid_key_pair_per_job() -> None:
    job = parse_job(training())
    first, second = build_ssh_secret(job, generate_job_keys()), build_ssh_secret(job, generate_job_keys())
    data = first["stringData"]
    private = load_ssh_private_key(data["id_ed25519"].encode(), password=None)
    public = load_ssh_public_key(data["id_ed25519.pub"].encode())
    assert private.public_key().public_bytes_raw() == public.public_bytes_raw()  # type: ignore[union-attr]
    assert data["authorized_keys"] == data["id_ed25519.pub"]
    assert "Port 2222" in data["ssh_config"]
    assert second["stringData"]["id_ed25519"] != data["id_ed25519"]
    host = load_ssh_private_key(data["ssh_host_ed25519_key"].encode(), password=None)
    pinned = data["known_hosts"].split()
    assert pinned[0] == "[cifar-worker-*]:2222,[*.cifar.ml.svc]:2222"
    assert load_ssh_public_key(" ".join(pinned[1:]).encode()).public_bytes_raw() == (  # type: ignore[union-attr]
        host.public_key().public_bytes_raw())  # type: ignore[union-attr]
    assert "StrictHostKeyChecking yes" in data["ssh_config"] and "UserKnownHostsFile ~/.ssh/known_hosts" in (
        data["ssh_config"])


@pytest.mark.parametrize("runs_ranks", [False, True])
def test_the_private_key_is_mounted_into_the_launcher_alone(runs_ranks: bool) -> None:
    job = parse_job(training(launcher={"runAsWorker": runs_ranks}))

    def ssh_keys(pod_spec: dict[str, Any]) -> set[str]:
        secrets = [v["secret"] for v in pod_spec["volumes"] if "secret" in v]
        assert [s["secretName"] for s in secrets] == ["cifar-ssh"]
        # optional: an older operator's Secret lacks the host key and known_hosts, and its pods must still start
        assert secrets[0]["optional"] is True
        return {item["key"] for item in secrets[0]["items"]}

    for index in range(job.spec.workers):
        assert ssh_keys(build_worker_pod(job, index)["spec"]) == {"authorized_keys", "ssh_host_ed25519_key"}
    launcher = build_launcher_job(job)["spec"]["template"]["spec"]
    assert ssh_keys(launcher) == {"id_ed25519", "ssh_config", "known_hosts"}


def test_only_pods_where_rank_0_may_run_get_a_token_and_none_names_an_account() -> None:
    job = parse_job(training())
    launcher_spec = build_launcher_job(job)["spec"]["template"]["spec"]
    assert launcher_spec["automountServiceAccountToken"] is False
    assert build_worker_pod(job, 0)["spec"]["automountServiceAccountToken"] is True
    assert "serviceAccountName" not in launcher_spec and "serviceAccountName" not in build_worker_pod(job, 0)["spec"]


def test_pod_template_merges_into_every_pod_but_cannot_steal_labels() -> None:
    template = {
        "metadata": {"annotations": {"team": "physics"}, "labels": {"kubetrain.dev/job-name": "other", "tier": "gpu"}},
        "spec": {
            "containers": [{"name": "worker", "securityContext": {"readOnlyRootFilesystem": False}}],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "registry"}],
        },
    }
    job = parse_job(training(podTemplate=template))
    pod = build_worker_pod(job, 0)
    assert pod["metadata"]["labels"]["kubetrain.dev/job-name"] == "cifar"
    assert pod["metadata"]["labels"]["tier"] == "gpu"
    assert pod["metadata"]["annotations"] == {"team": "physics"}
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert [v["name"] for v in pod["spec"]["volumes"]][-1] == "scratch"
    launcher = build_launcher_job(job)["spec"]["template"]
    assert launcher["spec"]["imagePullSecrets"] == [{"name": "registry"}]


def test_a_template_cannot_move_rename_or_reown_a_pod_even_past_the_parser() -> None:
    """Defence in depth: an API server with an older CRD stores any podTemplate metadata, and the builders still
    keep every pod in the job's namespace, under its own name, owned by the job."""
    job = parse_job(training())
    hostile = {"metadata": {"namespace": "kube-system", "name": "evil", "generateName": "evil-",
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}],
                            "finalizers": ["example.com/keep"], "labels": {"tier": "gpu"}},
               "kind": "Secret", "apiVersion": "v2"}
    job = replace(job, spec=replace(job.spec, pod_template=hostile))
    worker = build_worker_pod(job, 1)
    launcher = build_launcher_job(job)
    owner = [{"apiVersion": "kubetrain.dev/v1alpha1", "kind": "DistributedTraining", "name": "cifar", "uid": "uid-1",
              "controller": True, "blockOwnerDeletion": True}]
    assert (worker["apiVersion"], worker["kind"]) == ("v1", "Pod")
    assert {key: worker["metadata"].get(key) for key in ("namespace", "name", "ownerReferences")} == {
        "namespace": "ml", "name": "cifar-worker-1", "ownerReferences": owner}
    assert not {"generateName", "finalizers"} & set(worker["metadata"])
    assert worker["metadata"]["labels"]["tier"] == "gpu"
    template = launcher["spec"]["template"]
    assert set(template["metadata"]) == {"labels"} and template["metadata"]["labels"]["tier"] == "gpu"
    assert launcher["metadata"]["namespace"] == "ml" and launcher["metadata"]["ownerReferences"] == owner


def test_a_template_container_named_for_a_role_changes_only_that_roles_pod() -> None:
    env = {"name": "NCCL_DEBUG", "value": "INFO"}
    sidecar = {"name": "log-shipper", "image": "registry.example.com/shipper:1"}
    template = {"spec": {"containers": [{"name": "worker", "env": [env]},
                                        {"name": "launcher", "resources": {"limits": {"cpu": "1"}}}, sidecar]}}
    job = parse_job(training(podTemplate=template))
    worker = build_worker_pod(job, 0)["spec"]["containers"]
    launcher = build_launcher_job(job)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in worker] == ["worker", "log-shipper"]
    assert [c["name"] for c in launcher] == ["launcher", "log-shipper"]
    assert env in worker[0]["env"] and env not in launcher[0]["env"]
    assert launcher[0]["resources"]["limits"] == {"cpu": "1"} and worker[0]["resources"]["limits"]["cpu"] == "4"
    assert all(container.get("image") for container in [*worker, *launcher])


def test_pods_run_as_non_root_without_privilege_escalation() -> None:
    job = parse_job(training())
    for pod_spec in (build_worker_pod(job, 0)["spec"], build_launcher_job(job)["spec"]["template"]["spec"]):
        assert pod_spec["securityContext"]["runAsNonRoot"] is True
        container = pod_spec["containers"][0]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize(
    ("golden", "build"),
    [
        ("worker-pod.yaml", lambda job: build_worker_pod(job, 1, attempt=2)),
        ("launcher-job.yaml", lambda job: build_launcher_job(job, attempt=2)),
    ],
)
def test_golden_manifests(golden: str, build: Any) -> None:
    """Whole objects, reviewed by hand; regenerate with KUBETRAIN_UPDATE_GOLDEN=1 after an intended change."""
    import os

    job = parse_job(training(env=[{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}]))
    rendered = yaml.safe_dump(build(job), sort_keys=True)
    path = GOLDEN / golden
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN"):
        path.write_text(rendered)
    assert rendered == path.read_text()
