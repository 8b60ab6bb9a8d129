"""The engine's ``/metrics``: one scrape of a Prometheus text page, counter deltas between two scrapes,
and the background samplers that follow gauges while a capacity step runs (the engine's KV and queue
gauges here, the GPUs' memory in ``_gpu``)."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field

import httpx

from .._clock import SYSTEM_CLOCK, Clock

__all__ = ["GAUGES", "Metrics", "MetricsSampler", "Periodic", "delta", "pages", "scrape"]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class Metrics:
    """One scrape of a Prometheus text page: ``(name, labels) -> value``."""

    source: str
    at: float
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str, source: str = "", at: float | None = None) -> Metrics:
        m = cls(source, time.time() if at is None else at)
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            g = _LINE.match(line)
            if not g:
                continue
            try:
                value = float(g.group(3))
            except ValueError:
                continue
            labels = dict(_LABEL.findall(g.group(2) or ""))
            m.samples.append((g.group(1), labels, value))
        return m

    def value(self, name: str, **match: str) -> float | None:
        """The sum over every series of ``name`` whose labels match (None: no such series)."""
        found = [
            v
            for n, labels, v in self.samples
            if n == name and all(labels.get(k) == w for k, w in match.items())
        ]
        return sum(found) if found else None

    def labels(self, name: str) -> list[dict[str, str]]:
        return [labels for n, labels, _ in self.samples if n == name]


def delta(before: Metrics | None, after: Metrics | None, name: str, **match: str) -> float | None:
    """``after - before`` for a counter (or a histogram's ``_sum``/``_count``); None when either lacks it."""
    if before is None or after is None:
        return None
    a, b = after.value(name, **match), before.value(name, **match)
    if a is None or b is None:
        return None
    return a - b


async def pages(client: httpx.AsyncClient, urls: list[str], timeout: float = 10.0) -> list[Metrics]:
    """The Prometheus page of every URL that answered 200 (one engine or exporter per URL); a URL
    that fails or answers otherwise is left out."""
    out: list[Metrics] = []
    for url in urls:
        try:
            r = await client.get(url, timeout=timeout)
        except httpx.HTTPError:
            continue
        if r.status_code == 200:
            out.append(Metrics.parse(r.text, url))
    return out


async def scrape(client: httpx.AsyncClient, urls: list[str]) -> Metrics | None:
    """Scrape every URL and merge the pages (one engine per URL); None when none answered."""
    merged: Metrics | None = None
    for page in await pages(client, urls):
        if merged is None:
            merged = page
        else:
            merged.samples.extend(page.samples)
            merged.source += "," + page.source
    return merged


GAUGES = {
    "kv": "vllm:kv_cache_usage_perc",
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "preemptions": "vllm:num_preemptions_total",
}


class Periodic[T](abc.ABC):
    """A background sampler while a capacity step runs: ``sample`` every ``interval_s`` from ``start``,
    and once more at ``stop``, so that the series reaches the step's end. One loop for the engine's
    gauges and the GPUs' memory."""

    series: list[T]
    interval_s: float
    clock: Clock
    _task: asyncio.Task[None] | None

    @property
    @abc.abstractmethod
    def has_source(self) -> bool:
        """Whether there is anything to sample; without it ``start`` starts nothing."""

    @abc.abstractmethod
    async def sample(self) -> object:
        """Take one reading and append it to ``series`` (a failed reading appends nothing)."""

    async def _loop(self) -> None:
        while True:
            await self.sample()
            await self.clock.sleep(self.interval_s)

    def start(self) -> None:
        if self.has_source:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> list[T]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await self.sample()
        return self.series


class MetricsSampler(Periodic[dict[str, float | None]]):
    """Samples the KV and queue gauges in the background while a step runs."""

    def __init__(
        self, client: httpx.AsyncClient, urls: list[str], interval_s: float, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.client, self.urls, self.interval_s, self.clock = client, urls, interval_s, clock
        self.series: list[dict[str, float | None]] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = clock.monotonic()

    @property
    def has_source(self) -> bool:
        return bool(self.urls)

    async def sample(self) -> None:
        m = await scrape(self.client, self.urls) if self.urls else None
        if m is None:
            return
        row: dict[str, float | None] = {"t": round(self.clock.monotonic() - self._t0, 3)}
        for key, name in GAUGES.items():
            v = m.value(name)
            if key == "kv" and v is not None and m.labels(name):
                v = v / len(m.labels(name))  # mean over engines
            row[key] = v
        self.series.append(row)
