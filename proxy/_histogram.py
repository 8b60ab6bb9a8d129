"""A Prometheus histogram for the event loop's hot path.

``prometheus_client.Histogram.observe`` walks its buckets in Python and takes a lock for the bucket
and again for the sum: observed once per downstream write, that was a tenth of the forwarding
process's own Python per event. This one is observed from the event loop's thread only (the one
thread that forwards), so it needs no lock: one bisect and two additions. It is read by the
registry's collection, from any thread: a scrape that races an observation may see the sum and a
bucket one observation apart, which Prometheus histograms allow between scrapes anyway.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["LoopHistogram"]


class _Series:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bucket whose bound is >= value
        self.total += value


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
        yield family
