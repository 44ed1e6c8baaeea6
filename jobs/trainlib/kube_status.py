"""The one module that talks to the Kubernetes API: merge-patch a DistributedTraining's status subresource.

Inside a pod it authenticates with the mounted service-account token (in-cluster config); elsewhere it falls back to
the kubeconfig (e.g. `kubetrain run --local` against a development cluster).
"""

from __future__ import annotations

import functools
import os
from typing import Any

GROUP = "kubetrain.dev"
VERSION = "v1alpha1"
PLURAL = "distributedtrainings"
MERGE_PATCH = "application/merge-patch+json"
TIMEOUT = (5, 15)  # seconds to connect, to read: a report never holds a rank, or its exit, for long


@functools.lru_cache(maxsize=1)
def _custom_objects_api() -> Any:  # kubernetes.client.CustomObjectsApi, imported lazily
    from kubernetes import client, config

    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
    else:
        config.load_kube_config()
    return client.CustomObjectsApi()


def patch_status(namespace: str, name: str, body: dict) -> None:
    """Merge-patch `body` (`{"status": {...}}`) into DistributedTraining `namespace/name`; raises on API errors."""
    _custom_objects_api().patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, body, _content_type=MERGE_PATCH, _request_timeout=TIMEOUT)
