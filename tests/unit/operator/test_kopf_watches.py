"""kubetrain.kopf_watches' pure parts: the label filters it gives kopf, and the listing it reads from kopf's indices."""

from __future__ import annotations

import pytest

from kubetrain.cache import TRAININGS
from kubetrain.children import WATCHED_KINDS
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_ATTEMPT_LOG
from kubetrain.kopf_watches import IndexListing, index_name, indices, selected
from kubetrain.settings import from_environment


@pytest.mark.parametrize(("labels", "matches"), [
    ({LABEL_JOB: "a"}, True),
    ({LABEL_JOB: "a", LABEL_ROLE: "worker"}, True),
    ({LABEL_JOB: "a", LABEL_ROLE: ROLE_ATTEMPT_LOG}, False),
    ({LABEL_ROLE: "worker"}, False),
    ({}, False),
])
def test_the_filters_select_what_the_runtimes_label_selectors_do(labels: dict[str, str], matches: bool) -> None:
    configmaps = next(child for child in WATCHED_KINDS if child.field == "configmaps")
    assert configmaps.selector == f"{LABEL_JOB},{LABEL_ROLE}!={ROLE_ATTEMPT_LOG}"
    assert selected(configmaps.selector)(labels=labels) is matches
    assert selected(LABEL_JOB)(labels=labels) is (LABEL_JOB in labels)
    assert selected(None)(labels=labels) is True


def test_the_listing_reads_each_fields_index_by_job() -> None:
    job = {"metadata": {"name": "a", "namespace": "ns"}}
    pod = {"metadata": {"name": "a-worker-0", "namespace": "ns"}}
    kwargs = {index_name(TRAININGS): {("ns", "a"): [job]}, index_name("pods"): {("ns", "a"): [pod]}, "logger": None}
    listing = IndexListing(indices([TRAININGS, "pods"], kwargs))
    assert listing.of(TRAININGS, ("ns", "a")) == [job] and listing.of("pods", ("ns", "a")) == [pod]
    assert listing.of("pods", ("ns", "b")) == [] and listing.of("jobs", ("ns", "a")) == []
    assert listing.jobs(TRAININGS) == [("ns", "a")]


def test_the_watch_layer_is_one_of_two() -> None:
    assert from_environment({}).watch == "runtime"
    assert from_environment({"KUBETRAIN_WATCH": "kopf"}).watch == "kopf"
    with pytest.raises(ValueError, match="KUBETRAIN_WATCH='informers': use one of runtime, kopf"):
        from_environment({"KUBETRAIN_WATCH": "informers"})
