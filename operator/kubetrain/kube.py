"""The one module that talks to the Kubernetes API (official client): idempotent writes, events, the few reads no
cache serves (the owner of a child that already exists, a failed launcher's log), and the command line's cluster: its
kubeconfig, its default namespace, the watch `kubetrain status --watch` and `kubetrain wait` follow, the launcher
output `kubetrain logs` reads and the pods `kubetrain tensorboard` looks for."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import orjson
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, NotFoundError, ResourceNotFoundError

from kubetrain.cache import owned_by
from kubetrain.contract import (
    GROUP,
    KIND,
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_ROLE,
    PLURAL,
    ROLE_ATTEMPT_LOG,
    ROLE_LAUNCHER,
    VERSION,
    attempt_log_name,
)
from kubetrain.plan.model import EVENT_MESSAGE_CHARS
from kubetrain.refusals import Refusal, classify, not_served

log = logging.getLogger(__name__)

TRAINING = (f"{GROUP}/{VERSION}", KIND)
# Asks a list for its objects' metadata only (Kubernetes' PartialObjectMetadataList): their contents never travel.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


def _as_dict(_client: DynamicClient, data: dict[str, Any]) -> dict[str, Any]:
    """The dynamic client's response serializer that keeps the parsed JSON as it is (its default wraps every field in
    an object, which `to_dict()` then unwraps again: two walks over every object for nothing)."""
    return data


class ChildConflict(RuntimeError):
    """A child's name is taken by an object this job does not own."""


class LogUnreadable(RuntimeError):
    """A pod's log could not be read: the message says why, in one line."""


class ChildRefused(RuntimeError):
    """The API server refused to create a child: what it means for the job is in `refusal`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def load_api_client(connections: int = 10) -> client.ApiClient:
    """In-cluster service account when running in a pod, else $KUBECONFIG / ~/.kube/config; up to `connections` kept
    open to the API server (requests beyond them open and close one each time)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)


class Kube:
    """Thin, synchronous access to what the operator reads and writes; every object is a plain dict."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.dynamic = DynamicClient(api_client)
        self._resources: dict[tuple[str, str], Any] = {}
        self._discovery = threading.Lock()

    def _resource(self, api_version: str, kind: str) -> Any:
        """The kind's API resource, found once. One lookup at a time: a pass writes from several threads, and a miss
        rebuilds the discovery cache, which another thread must not read half built."""
        key = (api_version, kind)
        with self._discovery:
            if key not in self._resources:
                self._resources[key] = self.dynamic.resources.get(api_version=api_version, kind=kind)
            return self._resources[key]

    def create(self, obj: Mapping[str, Any], owner_uid: str) -> dict[str, Any]:
        """Create and return the object as stored; an existing object of ours is success (409, returned as it is),
        one that is not ours is a ChildConflict."""
        meta = obj["metadata"]
        try:
            resource = self._resource(obj["apiVersion"], obj["kind"])
        except ResourceNotFoundError:  # discovery has no such kind: a CRD the cluster lacks
            raise ChildRefused(not_served(obj["apiVersion"], obj["kind"], meta["name"])) from None
        try:
            created = resource.create(body=dict(obj), namespace=meta["namespace"], serialize=False)
            return cast(dict[str, Any], orjson.loads(created.data))
        except ConflictError:
            existing = resource.get(name=meta["name"], namespace=meta["namespace"], serializer=_as_dict)
            if not owned_by(existing, {owner_uid}):
                raise ChildConflict(
                    f"{obj['kind']} {meta['namespace']}/{meta['name']} exists and is not owned by this "
                    "DistributedTraining: delete or rename it"
                ) from None
            return dict(existing)
        except DynamicApiError as error:
            refusal = classify(error.status, obj["kind"], meta["name"], str(error.summary()))
            if refusal is None:
                raise
            raise ChildRefused(refusal) from None

    def patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `obj` into the object of its name; returns the object as stored."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        patched = resource.patch(body=dict(obj), name=meta["name"], namespace=meta["namespace"],
                                 content_type="application/merge-patch+json", serialize=False)
        return cast(dict[str, Any], orjson.loads(patched.data))

    def patch_existing(self, obj: Mapping[str, Any]) -> None:
        """Merge `obj` into the object of its name if there is one (no such object or kind: nothing to do)."""
        try:
            self.patch(obj)
        except (NotFoundError, ResourceNotFoundError):
            pass

    def delete(self, api_version: str, kind: str, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete the object of that name (only while its uid is `uid`, when given), tolerating 404, another object
        of that name (409) and a kind the cluster does not serve; dependents (a Job's pods) go in the background."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._resource(api_version, kind).delete(name=name, namespace=namespace, body=body, serialize=False)
        except (NotFoundError, ConflictError, ResourceNotFoundError):
            pass

    def delete_training(self, namespace: str, name: str) -> None:
        self.delete(*TRAINING, namespace=namespace, name=name)

    def list_metadata(self, api_version: str, kind: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The metadata of the objects of a kind that match `label_selector`, each as `{"metadata": {...}}`."""
        listing = self._resource(api_version, kind).get(namespace=namespace, label_selector=label_selector,
                                                        header_params={"Accept": METADATA_ONLY}, serializer=_as_dict)
        return [dict(item) for item in listing.get("items") or []]

    def read_log(self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int,
                 seconds: float) -> bytes:
        """The last `tail_lines` lines of a container's log, at most `limit_bytes` of them. LogUnreadable when the
        API server cannot give them (the pod is gone, its node does not answer) or has not within `seconds`."""
        deadline = time.monotonic() + seconds
        chunks: list[bytes] = []
        try:
            response = cast(urllib3.HTTPResponse, client.CoreV1Api(self.api_client).read_namespaced_pod_log(
                pod, namespace, container=container, tail_lines=tail_lines, limit_bytes=limit_bytes,
                _preload_content=False, _request_timeout=(CONNECT_SECONDS, seconds)))
            try:
                for chunk in response.stream(64 * 1024):
                    chunks.append(chunk)
                    if sum(map(len, chunks)) >= limit_bytes:
                        break
                    if time.monotonic() > deadline:
                        raise LogUnreadable(f"no whole answer within {seconds:g}s")
            finally:
                response.close()
        except ApiException as error:
            raise LogUnreadable(f"{error.status} {error.reason}: {_api_message(error)}") from None
        except urllib3.exceptions.HTTPError as error:
            raise LogUnreadable(str(getattr(error, "reason", None) or error)) from None
        return b"".join(chunks)[:limit_bytes]

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `status` into the job's status; returns the job as stored."""
        stored = self._resource(*TRAINING).status.patch(
            body={"status": dict(status)}, name=name, namespace=namespace,
            content_type="application/merge-patch+json", serialize=False)
        return cast(dict[str, Any], orjson.loads(stored.data))

    def event(self, training: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        """A core/v1 Event on the DistributedTraining; failures to post are logged, never raised."""
        meta = training["metadata"]
        now = datetime.now(timezone.utc)
        body = {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": training["apiVersion"],
                "kind": KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "type": event_type,
            "reason": reason,
            "message": message[:EVENT_MESSAGE_CHARS],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "kubetrain-operator"},
            "reportingComponent": "kubetrain-operator",
        }
        try:
            self._resource("v1", "Event").create(body=body, namespace=meta["namespace"], serialize=False)
        except DynamicApiError as error:
            log.warning("could not post event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], error.reason)


# -- the command line's cluster ----------------------------------------------------------------------------------------

POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"
CONNECT_SECONDS = 10
# A watch request ends on the server's side after this long; the client then watches again from where it was.
WATCH_SECONDS = 300
# How much longer than the server's end of a watch the client waits before it calls the server silent.
WATCH_SLACK_SECONDS = 30
GONE = 410


class ClusterError(RuntimeError):
    """The cluster could not answer: the message says what was tried and what went wrong, in one line."""


@dataclass(frozen=True)
class Cluster:
    """An API client for the command line, the namespace kubectl would use, and where both came from."""

    api_client: client.ApiClient
    namespace: str
    source: str

    @property
    def server(self) -> str:
        return str(self.api_client.configuration.host)


def context_namespace(context: Mapping[str, Any] | None) -> str:
    """The namespace of a kubeconfig context (as `list_kube_config_contexts` returns it), else default."""
    return str(((context or {}).get("context") or {}).get("namespace") or DEFAULT_NAMESPACE)


def pod_namespace(path: Path = POD_NAMESPACE_FILE) -> str:
    """The namespace of the pod this runs in, from its service account's files, else default."""
    try:
        return path.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def connect() -> Cluster:
    """The cluster kubectl would talk to: $KUBECONFIG (or ~/.kube/config) and its current context, else the pod's
    service account. Raises ClusterError naming both when neither is there. Nothing is sent to the server yet."""
    kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        _, current = config.list_kube_config_contexts(config_file=kubeconfig)
        source = f"kubeconfig {kubeconfig}, context {current.get('name', '?')}"
        return Cluster(client.ApiClient(configuration), context_namespace(current), source)
    except config.ConfigException as error:
        tried = f"kubeconfig {kubeconfig} ({error})"
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException as error:
        raise ClusterError(f"no cluster reachable: tried {tried} and a pod's service account ({error})") from None
    return Cluster(client.ApiClient(configuration), pod_namespace(), "the pod's service account")


def _unreachable(cluster: Cluster, error: urllib3.exceptions.HTTPError) -> ClusterError:
    cause = str(getattr(error, "reason", None) or error)
    # urllib3 starts its messages with the connection object, e.g. "HTTPSConnection(host=..., port=...): ..."
    cause = cause.split("): ", 1)[-1] if cause.startswith("HTTP") else cause
    return ClusterError(f"no cluster reachable at {cluster.server} ({cluster.source}): {cause}")


@contextlib.contextmanager
def _answers(cluster: Cluster) -> Iterator[None]:
    """Turns what the client raises into one ClusterError line (410 Gone excepted: the caller lists again)."""
    try:
        yield
    except urllib3.exceptions.HTTPError as error:
        raise _unreachable(cluster, error) from None
    except ApiException as error:
        if error.status == GONE:
            raise
        if error.status == 404:
            raise ClusterError(f"{cluster.server} ({cluster.source}) does not serve {PLURAL}.{GROUP}/{VERSION}: "
                               "is kubetrain's CRD installed?") from None
        raise _refused(cluster, error) from None


def _refused(cluster: Cluster, error: ApiException) -> ClusterError:
    return ClusterError(f"{cluster.server} ({cluster.source}) refused: {error.status} {error.reason}: "
                        f"{_api_message(error)}")


def _api_message(error: ApiException) -> str:
    try:
        return str(orjson.loads(error.body or b"{}").get("message", "")).strip()
    except orjson.JSONDecodeError:
        return str(error.body or "").strip()


def list_training(cluster: Cluster, namespace: str, name: str) -> tuple[dict[str, Any] | None, str]:
    """The job (None when there is no such job) and the resourceVersion to watch it from."""
    objects = client.CustomObjectsApi(cluster.api_client)
    with _answers(cluster):
        listing = cast(dict[str, Any], objects.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, field_selector=f"metadata.name={name}",
            _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS)))
    items = listing.get("items") or []
    return (dict(items[0]) if items else None), str(listing["metadata"]["resourceVersion"])


def follow_training(cluster: Cluster, namespace: str, name: str, timeout: float | None = None,
                    clock: Callable[[], float] = time.monotonic) -> Iterator[dict[str, Any] | None]:
    """The job as it is now, then as it is after each change; None when it does not exist or was deleted.

    A Kubernetes watch on the one name, resumed from the last resourceVersion it saw. When the server no longer has
    that version (410 Gone) the job is listed again. Raises TimeoutError once `timeout` seconds have passed.
    """
    deadline = None if timeout is None else clock() + timeout
    objects = client.CustomObjectsApi(cluster.api_client)
    body, version = list_training(cluster, namespace, name)
    yield body
    watcher = watch.Watch()
    while True:
        seconds = WATCH_SECONDS if deadline is None else min(WATCH_SECONDS, math.ceil(deadline - clock()))
        if seconds <= 0:
            raise TimeoutError(f"{timeout:g}s passed")
        try:
            with _answers(cluster):
                try:
                    for event in watcher.stream(
                        objects.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                        field_selector=f"metadata.name={name}", resource_version=version, allow_watch_bookmarks=True,
                        timeout_seconds=seconds, _request_timeout=(CONNECT_SECONDS, seconds + WATCH_SLACK_SECONDS),
                    ):
                        obj = event["raw_object"]
                        version = str(obj["metadata"]["resourceVersion"])
                        if event["type"] != "BOOKMARK":
                            yield None if event["type"] == "DELETED" else dict(obj)
                except urllib3.exceptions.ProtocolError as error:
                    # The connection dropped in the middle of a watch: watch again from the last version seen.
                    log.debug("watch of %s/%s dropped (%s): watching again", namespace, name, error)
        except ApiException as error:  # only 410 Gone gets here
            log.debug("watch of %s/%s expired (%s): listing again", namespace, name, error.reason)
            body, version = list_training(cluster, namespace, name)
            yield body


def list_trainings(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """Every DistributedTraining of the namespace, as the API server returns them."""
    objects = client.CustomObjectsApi(cluster.api_client)
    with _answers(cluster):
        listing = cast(dict[str, Any], objects.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS)))
    return [dict(item) for item in listing.get("items") or []]


def list_job_pods(cluster: Cluster, namespace: str, name: str, role: str | None = None) -> list[dict[str, Any]]:
    """Every pod labelled as the job's (of `role` only, when given; every attempt), as the API server returns them."""
    selector = f"{LABEL_JOB}={name}" + ("" if role is None else f",{LABEL_ROLE}={role}")
    pods = client.CoreV1Api(cluster.api_client)
    with _core_answers(cluster):
        response: Any = pods.list_namespaced_pod(  # the raw response (_preload_content=False): plain JSON
            namespace, label_selector=selector, _preload_content=False,
            _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS))
    return [dict(item) for item in _json(response).get("items") or []]


def create_training(cluster: Cluster, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create the job in its metadata.namespace; returns it as stored. A taken name is a ClusterError saying so."""
    objects = client.CustomObjectsApi(cluster.api_client)
    namespace = body["metadata"]["namespace"]
    with _answers(cluster):
        return cast(dict[str, Any], objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, dict(body), _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS)))


def remove_training(cluster: Cluster, namespace: str, name: str) -> bool:
    """Delete the job (its children go in the background); False when there was no such job."""
    if list_training(cluster, namespace, name)[0] is None:  # a 404 from delete could also mean no CRD
        return False
    objects = client.CustomObjectsApi(cluster.api_client)
    try:
        with _answers(cluster):
            objects.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, body=client.V1DeleteOptions(propagation_policy="Background"),
                _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS))
    except ClusterError:
        if list_training(cluster, namespace, name)[0] is None:  # deleted by someone else meanwhile
            return False
        raise
    return True


# -- the command line's reads of launcher output (kubetrain logs) -----------------------------------------------------


@contextlib.contextmanager
def _core_answers(cluster: Cluster) -> Iterator[None]:
    """Like `_answers`, for Kubernetes' own kinds: a 404 is left to the caller (the object is not there)."""
    try:
        yield
    except urllib3.exceptions.HTTPError as error:
        raise _unreachable(cluster, error) from None
    except ApiException as error:
        if error.status == 404:
            raise
        raise _refused(cluster, error) from None


def _json(response: Any) -> dict[str, Any]:
    return cast(dict[str, Any], orjson.loads(response.data))


def launcher_pods(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """Every launcher pod of the job that is still there, of any attempt."""
    return list_job_pods(cluster, namespace, name, role=ROLE_LAUNCHER)


def attempt_log(cluster: Cluster, namespace: str, name: str, attempt: int) -> dict[str, Any] | None:
    """The copy the operator kept of attempt `attempt`'s launcher output; None when there is none."""
    core = client.CoreV1Api(cluster.api_client)
    try:
        with _core_answers(cluster):
            response = core.read_namespaced_config_map(attempt_log_name(name, attempt), namespace,
                                                       _preload_content=False,
                                                       _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS))
    except ApiException:  # only 404 gets here
        return None
    return _json(response)


def kept_attempts(cluster: Cluster, namespace: str, name: str) -> list[int]:
    """The attempts the operator kept a copy of the launcher output of."""
    core = client.CoreV1Api(cluster.api_client)
    with _core_answers(cluster):
        response = core.list_namespaced_config_map(
            namespace, label_selector=f"{LABEL_JOB}={name},{LABEL_ROLE}={ROLE_ATTEMPT_LOG}", _preload_content=False,
            _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS))
    labels = (item["metadata"].get("labels") or {} for item in _json(response)["items"])
    return sorted(int(label[LABEL_ATTEMPT]) for label in labels if str(label.get(LABEL_ATTEMPT, "")).isdigit())


@contextlib.contextmanager
def _log_answers(cluster: Cluster) -> Iterator[None]:
    """What the API server says instead of a log is a LogUnreadable; no answer at all is a ClusterError."""
    try:
        yield
    except urllib3.exceptions.HTTPError as error:
        raise _unreachable(cluster, error) from None
    except ApiException as error:
        raise LogUnreadable(f"{error.status} {error.reason}: {_api_message(error)}") from None


def pod_log(cluster: Cluster, namespace: str, pod: str, container: str) -> bytes:
    """A container's whole log as it is now."""
    core = client.CoreV1Api(cluster.api_client)
    with _log_answers(cluster):
        response = cast(urllib3.HTTPResponse, core.read_namespaced_pod_log(
            pod, namespace, container=container, _preload_content=False,
            _request_timeout=(CONNECT_SECONDS, WATCH_SLACK_SECONDS)))
        return bytes(response.data)


def follow_pod_log(cluster: Cluster, namespace: str, pod: str, container: str) -> Iterator[bytes]:
    """A container's log from its start, each line after its time, then as it is written, until the container ends or
    the connection does (a dropped connection ends it quietly: the caller looks again)."""
    core = client.CoreV1Api(cluster.api_client)
    with _log_answers(cluster):
        response = cast(urllib3.HTTPResponse, core.read_namespaced_pod_log(
            pod, namespace, container=container, follow=True, timestamps=True, _preload_content=False,
            _request_timeout=None))  # a training may print nothing for an hour: wait for its next line
    try:
        yield from response.stream(64 * 1024)
    except urllib3.exceptions.HTTPError as error:
        log.debug("the log stream of %s/%s dropped (%s)", namespace, pod, error)
    finally:
        response.close()
