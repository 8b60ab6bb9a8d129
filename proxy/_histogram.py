"""A Prometheus histogram and counter for the event loop's hot path.

``prometheus_client.Histogram.observe`` walks its buckets in Python and takes a lock for the bucket
and again for the sum: observed once per downstream write, that was a tenth of the forwarding
process's own Python per event. ``Counter.inc`` checks its amount and takes a lock: three times an
exchange, 2 % of the forwarding process's instructions. These are changed from the event loop's
thread only (the one thread that forwards), so they need no lock: one bisect and two additions, one
addition. They are read by the registry's collection, from any thread: a scrape that races an
observation may see the sum and a bucket one observation apart, which Prometheus histograms allow
between scrapes anyway, and a counter one increment behind.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["LoopCounter", "LoopHistogram"]


class _Series:
    """One label value's buckets and sum. They are arrays, not a list and a float: the compiled relay
    (proxy/_relay_c.c) holds them and adds to them in place, with no object made per observation,
    and a new array is never swapped in (the relay would go on adding to the old one)."""

    __slots__ = ("bounds", "counts", "created", "sums")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = array("q", bytes(8 * (len(bounds) + 1)))  # the last: above every bound (+Inf)
        self.sums = array("d", [0.0])  # the sum of the values observed, the one item
        self.created = time.time()

    @property
    def total(self) -> float:
        return self.sums[0]

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bucket whose bound is >= value
        self.sums[0] += value


class LoopHistogram(Collector):
    """A histogram with one label, observed as ``h.labels(value).observe(seconds)``."""

    def __init__(
        self, name: str, documentation: str, label: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self.bounds = tuple(sorted(float(b) for b in buckets))
        self._series: dict[str, _Series] = {}
        registry.register(self)

    def labels(self, value: str) -> _Series:
        series = self._series.get(value)
        if series is None:
            series = self._series[value] = _Series(self.bounds)
        return series

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, series in list(self._series.items()):
            cumulative, running = [], 0
            for bound, n in zip((*self.bounds, float("inf")), list(series.counts), strict=True):
                running += n
                cumulative.append((floatToGoString(bound), running))  # type: ignore[no-untyped-call]
            family.add_metric([value], cumulative, series.total)
            # as prometheus_client's Histogram gives it: when the series began
            family.add_sample(f"{self.name}_created", {self.label: value}, series.created)
        yield family


class _Count:
    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class LoopCounter(Collector):
    """A counter with fixed label names, incremented as ``c.labels(*values).inc(n)`` (or ``c.inc(n)``
    without labels); exposed as ``prometheus_client.Counter`` exposes one (``_total``, ``_created``)."""

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labels)
        self._series: dict[tuple[str, ...], _Count] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Count:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected, got {len(values)}")
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = _Count()
        return series

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        for values, series in list(self._series.items()):
            family.add_metric(list(values), series.value, created=series.created)
        yield family
