"""The watch layer on kopf (KUBETRAIN_WATCH=kopf), in place of kubetrain.runtime's watches and store.

For each watched resource, an index (`@kopf.index`) keeps the projected objects by the jobs they belong to, and an
event handler (`@kopf.on.event`) tells the controller what changed, as kubetrain.runtime.informers does. kopf calls
no event handler before every index has listed once (its documented indexing guarantee), so no pass sees a job
without its children; it changes an object's indices before it calls that object's handlers. Both run on kopf's
event loop, where the controller reads the indices (kubetrain.cache.take_snapshot).

kopf's public API only. Unlike kubetrain.runtime: kopf filters by label in the operator, not in the API server (it
lists and watches every object of each kind), serves every namespace (KUBETRAIN_NAMESPACES is not read), and tells
nothing of a refused watch or of the end of a listing beyond the guarantee above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import kopf

from kubetrain.cache import kept
from kubetrain.controller import jobs_of, watched
from kubetrain.runtime.informers import LISTED
from kubetrain.runtime.store import JobKey, Obj
from kubetrain.settings import Settings

Index = Mapping[JobKey, Iterable[Obj]]


def index_name(field: str) -> str:
    """The kwarg name kopf gives the index of `field` to every handler."""
    return f"kubetrain_{field}_by_job"


class IndexListing:
    """kubetrain.cache.Listing over kopf's indices, one per field."""

    def __init__(self, indices: Mapping[str, Index]) -> None:
        self._indices = indices

    def of(self, field: str, job: JobKey) -> list[Obj]:
        index = self._indices.get(field)
        return list(index.get(job, ())) if index is not None else []

    def jobs(self, field: str) -> list[JobKey]:
        return list(self._indices.get(field, {}))


def indices(fields: Iterable[str], kwargs: Mapping[str, Any]) -> dict[str, Index]:
    """The indices of `fields` among a handler's kwargs."""
    return {field: kwargs[index_name(field)] for field in fields}


def selected(selector: str | None) -> Callable[..., bool]:
    """A `when=` filter for the label selectors kubetrain.children uses: `key` and `key,key2!=value`."""
    terms = [term.strip() for term in (selector or "").split(",") if term.strip()]

    def matches(labels: Mapping[str, str], **_: Any) -> bool:
        for term in terms:
            key, unequal, value = term.partition("!=")
            if unequal and labels.get(key) == value or not unequal and key not in labels:
                return False
        return True

    return matches


def register(settings: Settings) -> list[str]:
    """Register an index and an event handler for each resource the controller watches; the fields watched.

    Called when kubetrain.reconcile is imported, before kopf starts its watches. The event handler finds the
    controller in kopf's memo (set by the startup handler) and hands it the change, as the informers would.
    """
    fields = []
    for field, resource in watched(replace(settings, namespaces=())):
        fields.append(field)
        belongs = jobs_of(field)
        spec = (resource.api_version, resource.plural)
        when = selected(resource.label_selector)

        async def index(body: Obj, field: str = field, belongs: Callable[[Obj], set[JobKey]] = belongs,
                        **_: Any) -> dict[JobKey, Obj]:
            projected = kept(field, body)
            return {job: projected for job in belongs(projected)}

        async def event(event: Mapping[str, Any], memo: kopf.Memo, field: str = field,
                        belongs: Callable[[Obj], set[JobKey]] = belongs, **_: Any) -> None:
            controller = getattr(memo, "controller", None)
            if controller is None or not isinstance(event.get("object"), Mapping):
                return
            projected = kept(field, event["object"])
            controller.changed(field, event.get("type") or LISTED, projected, belongs(projected))

        kopf.index(*spec, id=index_name(field), when=when)(index)
        kopf.on.event(*spec, id=f"kubetrain_{field}_events", when=when)(event)
    return fields
