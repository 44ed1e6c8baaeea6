"""kopf, trimmed to what this operator uses: watches, indices and event handlers, no change handlers (no
on.create/update/delete, no finalizers, no annotations written on objects). What kopf would otherwise do on every
watch event for all of them, at hundreds of events a second, costs CPU the API server needs."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import kopf


class NoDiffBase(kopf.DiffBaseStorage):
    """The "last handled state" kopf compares to find changes, for change handlers only: with none registered, the
    deep copy of every body it builds on every event is waste. Nothing is read or stored."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def trim(settings: kopf.OperatorSettings) -> None:
    """Apply to the settings at startup."""
    settings.persistence.diffbase_storage = NoDiffBase()
    # "Handler 'on_pods' succeeded." for every event of every child: warnings and errors still show.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
