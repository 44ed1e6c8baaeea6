"""The one module that talks to the Kubernetes API (official client): idempotent writes, events, and the few reads no
cache serves (`kubetrain status`, the owner of a child that already exists)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, cast

import orjson
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, NotFoundError, ResourceNotFoundError

from kubetrain.cache import owned_by
from kubetrain.contract import GROUP, KIND, VERSION
from kubetrain.refusals import Refusal, classify, not_served

log = logging.getLogger(__name__)

TRAINING = (f"{GROUP}/{VERSION}", KIND)


def _as_dict(_client: DynamicClient, data: dict[str, Any]) -> dict[str, Any]:
    """The dynamic client's response serializer that keeps the parsed JSON as it is (its default wraps every field in
    an object, which `to_dict()` then unwraps again: two walks over every object for nothing)."""
    return data


class ChildConflict(RuntimeError):
    """A child's name is taken by an object this job does not own."""


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

    def get_training(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self._resource(*TRAINING).get(name=name, namespace=namespace, serializer=_as_dict))
        except NotFoundError:
            return None

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

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Delete, tolerating 404; dependents (a Job's pods) are removed in the background."""
        try:
            self._resource(api_version, kind).delete(
                name=name, namespace=namespace, body={"propagationPolicy": "Background"}, serialize=False
            )
        except NotFoundError:
            pass

    def delete_training(self, namespace: str, name: str) -> None:
        self.delete(*TRAINING, namespace=namespace, name=name)

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `status` into the job's status; returns the job as stored."""
        stored = self._resource(*TRAINING).status.patch(
            body={"status": dict(status)}, name=name, namespace=namespace,
            content_type="application/merge-patch+json", serializer=_as_dict)
        return cast(dict[str, Any], stored)

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
            "message": message[:1024],
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
