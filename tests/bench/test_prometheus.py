"""Counters from Prometheus text, as the API server and the operator expose them."""

from __future__ import annotations

import pytest

from .prometheus import delta, parse, total

BEFORE = """# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 10
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} 5
apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 100
kubetrain_reconcile_duration_seconds_count 3
kubetrain_reconcile_duration_seconds_sum 0.25
"""
AFTER = BEFORE.replace("} 10", "} 14").replace('workload-low"} 7', 'workload-low"} 19').replace("count 3", "count 5")


def test_parse_reads_names_labels_and_values() -> None:
    samples = parse(BEFORE)
    assert len(samples) == 6
    first = samples[0]
    assert first.name == "apiserver_request_total"
    assert first.labels == {"code": "201", "component": "apiserver", "resource": "pods", "verb": "POST"}
    assert first.value == 10


def test_total_and_delta_filter_by_labels() -> None:
    before, after = parse(BEFORE), parse(AFTER)
    assert total(before, "apiserver_request_total") == 15
    operator = {"where": lambda labels: labels.get("flow_schema") == "service-accounts"}
    assert delta(before, after, "apiserver_flowcontrol_dispatched_requests_total", **operator) == 12
    assert delta(before, after, "kubetrain_reconcile_duration_seconds_count") == 2
    assert total(before, "missing_metric") == 0


def test_label_values_are_unescaped() -> None:
    (sample,) = parse('m{path="a\\"b\\\\c"} 1.5e3 1700000000000')
    assert sample.labels["path"] == 'a"b\\c'
    assert sample.value == 1500


def test_garbage_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a Prometheus sample"):
        parse("this is not a metric line at all{")
