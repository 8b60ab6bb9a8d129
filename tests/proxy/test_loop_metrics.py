"""The event loop's own counter and histogram (proxy/_histogram.py) expose what prometheus_client's
Counter and Histogram expose for the same changes: a scrape cannot tell them apart."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from wirecheck.proxy._histogram import LoopCounter, LoopHistogram

BUCKETS = (0.001, 0.01, 0.1)


def _page(registry: CollectorRegistry) -> str:
    """The exposition, with ``_created`` timestamps (when each series began) as one placeholder."""
    return re.sub(r"(_created\{[^}]*\}|_created) \S+", r"\1 T", generate_latest(registry).decode())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["caller", "engine"]),
            st.sampled_from(["ok", "upstream_error"]),
            st.integers(0, 9),
        ),
        max_size=20,
    )
)
def test_a_loop_counter_is_scraped_as_a_prometheus_counter(incs: list[tuple[str, str, int]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopCounter("wirecheck_exchanges", "Exchanges forwarded.", ["tap", "outcome"], ours)
    plain = Counter("wirecheck_exchanges", "Exchanges forwarded.", ["tap", "outcome"], registry=theirs)
    for tap, outcome, n in incs:
        loop.labels(tap, outcome).inc(n)
        plain.labels(tap, outcome).inc(n)
    assert _page(ours) == _page(theirs)


def test_a_loop_counter_without_labels_and_its_label_count() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopCounter("wirecheck_store_drops", "Dropped.", [], ours)
    plain = Counter("wirecheck_store_drops", "Dropped.", registry=theirs)
    for c in (loop, plain):
        c.inc()
        c.inc(2)
    assert _page(ours) == _page(theirs)
    assert "wirecheck_store_drops_total 3.0" in _page(ours)
    with pytest.raises(ValueError, match="1 label values expected, got 2"):
        LoopCounter("x", "x", ["tap"], CollectorRegistry()).labels("a", "b")


@given(st.lists(st.tuples(st.sampled_from(["caller", "engine"]), st.floats(0, 1)), max_size=20))
def test_a_loop_histogram_is_scraped_as_a_prometheus_histogram(values: list[tuple[str, float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopHistogram("wirecheck_added_latency_seconds", "Added.", "tap", BUCKETS, ours)
    plain = Histogram("wirecheck_added_latency_seconds", "Added.", ["tap"], buckets=BUCKETS, registry=theirs)
    for tap, v in values:
        loop.labels(tap).observe(v)
        plain.labels(tap).observe(v)
    # the sums are added in the same order: equal to the last bit
    assert _page(ours) == _page(theirs)
