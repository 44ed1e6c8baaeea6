"""The DistributedTraining a notebook asks for: from keyword arguments, a dict or a job.yaml.

It is judged by the rules the CLI uses (kubetrain.local.check_job: the CRD's schema and CEL rules, then the
parser's). Pure, but for reading a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api import SpecError
from kubetrain.client.errors import InvalidJob
from kubetrain.contract import GROUP, KIND, VERSION
from kubetrain.local import JobFileError, check_job, read_job_file

API_VERSION = f"{GROUP}/{VERSION}"
_SNAKE = re.compile(r"_([a-z0-9])")

JobSource = Mapping[str, Any] | str | os.PathLike[str]


def camel_case(key: str) -> str:
    """slots_per_worker -> slotsPerWorker; a name already in camelCase stays as it is."""
    return _SNAKE.sub(lambda match: match.group(1).upper(), key)


def body_from_arguments(name: str, image: str, command: Sequence[str], workers: int | None = None,
                        labels: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A whole DistributedTraining from keyword arguments.

    The other keywords are spec fields, in the YAML's camelCase or in snake_case (run_policy=...). Their values are
    written as in YAML. Unknown names are left for the schema check to name.
    """
    fields: dict[str, Any] = {"image": image, "command": list(command)}
    if workers is not None:
        fields["workers"] = workers
    fields.update({camel_case(key): value for key, value in spec.items()})
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": fields}


def body_from(source: JobSource) -> dict[str, Any]:
    """The body of a dict (apiVersion and kind filled in when missing) or of a job.yaml's one DistributedTraining."""
    if isinstance(source, Mapping):
        return {"apiVersion": API_VERSION, "kind": KIND, **source}
    try:
        return read_job_file(source)
    except JobFileError as error:
        raise InvalidJob("", str(error)) from None


def placed(body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The body checked and placed in `namespace`; InvalidJob names the field at fault.

    A body that names another namespace is refused: this client reads and waits in its own.
    """
    metadata = body.get("metadata") or {}
    written = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if written and written != namespace:
        raise InvalidJob("metadata.namespace", f"is {written!r}, but this client works in {namespace!r}: "
                                               f"make a Client(namespace={written!r}) or remove it")
    try:
        check_job(body, namespace)
    except SpecError as error:
        raise InvalidJob(error.field, error.message) from None
    return {**body, "metadata": {**metadata, "namespace": namespace}}
