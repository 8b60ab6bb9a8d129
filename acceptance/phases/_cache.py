"""The prefix-cache phase: cold, warm A, warm B and a changed-prefix control, measured by counter deltas
into :class:`CacheFacts` (judged in ``_cache_judges``).

Every probe is salted with this run's id at the very start of the prompt (the first tool's
description: tools come first in the chat template), so "cold" is cold even on an engine that served
the probe set before; the control gets its own salt, so its prefix differs from the first token on.

Between probes the engine's ``/metrics`` is scraped; the deltas of ``prefix_cache_queries_total``,
``prefix_cache_hits_total``, ``prompt_tokens_cached_total``, the external (KV connector) counters,
``request_prefill_kv_computed_tokens`` and ``request_prefill_time_seconds`` are set beside the
``cached_tokens`` each answer reports. With several metrics URLs, instances are never summed: a probe's
deltas are the instance's whose counters moved, and a counter that fell is a restart.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from wirecheck.contracts import FAMILIES
from wirecheck.generators import cache_probe_set

from .._blocks import BarPlot, Block, Table, Text, fmt
from .._model import Facts
from ..load import Metrics, Sample, delta, measure, scrape
from ._context import RunContext

__all__ = ["PROBES", "CacheFacts", "measure_cache"]

PROBES = ("cold", "warm_a", "warm_b", "control")
COUNTERS = {
    "queries": "vllm:prefix_cache_queries_total",
    "hits": "vllm:prefix_cache_hits_total",
    "cached": "vllm:prompt_tokens_cached_total",
    "prompt": "vllm:prompt_tokens_total",
    "external_queries": "vllm:external_prefix_cache_queries_total",
    "external_hits": "vllm:external_prefix_cache_hits_total",
    "computed_sum": "vllm:request_prefill_kv_computed_tokens_sum",
    "computed_count": "vllm:request_prefill_kv_computed_tokens_count",
    "prefill_s": "vllm:request_prefill_time_seconds_sum",
}
_SHOWN = ("prompt_tokens", "queries", "hits", "cached", "computed_sum", "prefill_s", "usage_cached_tokens")


@dataclass(slots=True, kw_only=True)
class CacheFacts(Facts):
    metrics_urls: list[str] = field(default_factory=list)
    #: why the counters could not be read (no URL, no answer); None: they were
    metrics_problem: str | None = None
    run_id: str = ""
    #: per probe: the answer (ok, error, prompt and cached tokens, TTFT) and the counters' deltas
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``vllm:cache_config_info``'s labels as scraped
    cache_config: dict[str, str] = field(default_factory=dict)
    #: the tokens warm B shares with cold from the start, by the engine's /tokenize (None: unknown)
    shared_b: int | None = None
    sample_set_version: str = ""
    #: the prefix cache is hybrid (KDA), and who says so: the metrics, or the model's family
    hybrid: bool = False
    hybrid_from: str | None = None
    #: --prefix-cache-retention-interval, from the metrics or the startup log
    retention_interval: str | None = None
    samples: list[Sample] = field(default_factory=list)

    def sent(self) -> list[Any]:
        return self.samples

    def total(self, key: str) -> float:
        return sum((r[key] or 0) for r in self.probes.values())

    @property
    def failed_probes(self) -> list[str]:
        return [n for n, r in self.probes.items() if not r["ok"]]

    @property
    def still(self) -> bool:
        """No counter moved while the four probes were served: not the serving instance's scrape."""
        rows = self.probes.values()
        return all(r["queries"] in (None, 0) for r in rows) and all(r["prompt"] in (None, 0) for r in rows)

    @property
    def counters_usable(self) -> bool:
        """The probes answered and the scrape is the serving instance's."""
        return bool(self.probes) and not self.failed_probes and not self.still

    @property
    def judgeable(self) -> bool:
        """The counters are usable and prefix caching is on: hits can be judged probe by probe."""
        return self.counters_usable and self.total("queries") > 0

    @property
    def retained_note(self) -> str:
        """Why warm B hits less on a hybrid (KDA) cache ('' when the cache is not hybrid)."""
        if not self.hybrid:
            return ""
        interval = self.retention_interval
        return (
            "the hybrid (KDA) cache keeps state only at prompt ends"
            + (f" and every {interval} tokens" if interval not in (None, "0") else "")
            + ": warm B shares the tools and system prompt but not the cold prompt's end, so it hits only up to a "
            "retained boundary; --prefix-cache-retention-interval N keeps state every N tokens for agent prefixes"
        )

    def to_json(self) -> dict[str, Any]:
        if self.metrics_problem is not None:
            return {}
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "probes": self.probes,
            "cache_config": self.cache_config,
            "shared_prefix_tokens_warm_b": self.shared_b,
            "sample_set_version": self.sample_set_version,
        }
        if self.hybrid_from is not None:
            out["hybrid_from"] = self.hybrid_from
        if self.judgeable and self.retained_note:
            out["hybrid_explanation"] = self.retained_note
        return out

    def blocks(self) -> list[Block]:
        if not self.probes:
            return []
        rows = [[n, *(fmt(r.get(c)) for c in _SHOWN)] for n, r in self.probes.items()]
        out: list[Block] = [Table("cache-probes", ["probe", *_SHOWN], rows, heading="Cache probes")]
        if self.judgeable and self.retained_note:
            out.append(Text(f"Hybrid cache: {self.retained_note}."))
        names = list(self.probes)
        out.append(
            BarPlot(
                "Prefix cache counter deltas per probe (tokens)",
                names,
                [(k, [float(self.probes[n][c] or 0) for n in names]) for k, c in _BARS],
            )
        )
        return out

    def alert_thresholds(self) -> dict[str, float]:
        # half the hit rate warm A reached, between 5% and 50%
        wa = self.probes.get("warm_a") or {}
        if not wa.get("queries"):
            return {}
        return {"prefix_hit_rate": round(max(min(0.5 * wa["hits"] / wa["queries"], 0.5), 0.05), 3)}


_BARS = (("queries", "queries"), ("hits", "hits"), ("computed", "computed_sum"))


def _salted(body: dict[str, Any], salt: str) -> dict[str, Any]:
    b = copy.deepcopy(body)
    fn = b["tools"][0]["function"]
    fn["description"] = f"[{salt}] " + fn.get("description", "")
    return b


async def _shared_prefix(
    client: httpx.AsyncClient, engine_url: str | None, a: dict[str, Any], b: dict[str, Any], model: str | None
) -> int | None:
    """Tokens two prompts share from the start, by the engine's own /tokenize (None: not available)."""
    if not engine_url:
        return None
    toks = []
    for body in (a, b):
        try:
            payload = {
                "messages": body["messages"],
                "tools": body["tools"],
                **({"model": model} if model else {}),
            }
            r = await client.post(engine_url.rstrip("/") + "/tokenize", json=payload, timeout=30)
            toks.append(r.json()["tokens"] if r.status_code == 200 else None)
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
    if toks[0] is None or toks[1] is None:
        return None
    n = 0
    for x, y in zip(toks[0], toks[1], strict=False):
        if x != y:
            break
        n += 1
    return n


def _deltas(before: Metrics | None, after: Metrics | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, metric in COUNTERS.items():
        d = delta(before, after, metric)
        out[key] = None if d is None else round(d, 6)
    return out


class _Scrapes:
    """The counters before each probe: one merged scrape, or one per instance (never summed)."""

    def __init__(self, client: httpx.AsyncClient, urls: list[str]) -> None:
        self.client, self.urls = client, urls
        self.before: Metrics | None = None
        self.each: dict[str, Metrics | None] = {}

    async def start(self) -> Metrics | None:
        self.before = await scrape(self.client, self.urls)
        if len(self.urls) > 1:
            self.each = {u: await scrape(self.client, [u]) for u in self.urls}
        return self.before

    async def moved(self) -> dict[str, Any]:
        """The deltas since the last call; with several instances, those of the one that answered."""
        if len(self.urls) == 1:
            after = await scrape(self.client, self.urls)
            deltas, self.before = _deltas(self.before, after), after
            return dict(deltas)
        after_each = {u: await scrape(self.client, [u]) for u in self.urls}
        moved = {u: delta(self.each.get(u), m, COUNTERS["queries"]) or 0.0 for u, m in after_each.items()}
        answered = max(moved, key=lambda u: moved[u])
        row: dict[str, Any] = {
            "instance": answered,
            "instances_moved": sorted(u for u, d in moved.items() if d > 0),
            "restarted": sorted(u for u, d in moved.items() if d < 0),
            **_deltas(self.each.get(answered), after_each[answered]),
        }
        self.each = after_each
        return row


def _hybrid(config: dict[str, str], family: str, retention: Any) -> tuple[bool, str | None, str | None]:
    """Whether the cache is hybrid, who says so, and the retention interval. Real vLLM exposes no
    hybrid label (only the simulator does): the family table tells, e.g. Kimi K3 mixes KDA (linear
    attention) with full attention."""
    fam = FAMILIES.get(family)
    if config.get("hybrid_kv_cache") is not None:
        hybrid, source = config["hybrid_kv_cache"] == "True", "vllm:cache_config_info"
    elif fam is not None and fam.hybrid_kv_cache:
        hybrid, source = True, f"model family {fam.name}"
    else:
        hybrid, source = False, None
    interval = config.get("prefix_cache_retention_interval")
    if interval is None and retention is not None:
        interval = str(retention)
    return hybrid, source, interval


async def measure_cache(ctx: RunContext) -> CacheFacts:
    t = ctx.target
    probes = cache_probe_set()
    run_id = uuid.uuid4().hex[:12]
    bodies = {n: _salted(probes[n], f"run {run_id}" + (" control" if n == "control" else "")) for n in PROBES}
    for b in bodies.values():
        b["max_tokens"] = 64
        if t.model:
            b["model"] = t.model
    facts = CacheFacts(metrics_urls=list(t.metrics_urls), run_id=run_id, sample_set_version=probes["version"])
    if not t.metrics_urls:
        facts.metrics_problem = "no --metrics-url and no --engine-url: the cache counters cannot be read"
        return facts
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
        facts.shared_b = await _shared_prefix(client, t.engine_url, bodies["cold"], bodies["warm_b"], t.model)
        scrapes = _Scrapes(client, t.metrics_urls)
        before = await scrapes.start()
        if before is None:
            facts.metrics_problem = f"no answer from {', '.join(t.metrics_urls)}"
            return facts
        labels = before.labels("vllm:cache_config_info")
        facts.cache_config = labels[0] if labels else {}
        for name in PROBES:
            ctx.progress(f"cache: {name}")
            s = await measure(client, t.chat_url, bodies[name], headers=t.headers, clock=ctx.clock)
            facts.samples.append(s)
            answer: dict[str, Any] = {"ok": s.ok, "error": s.error, "prompt_tokens": s.prompt_tokens}
            answer |= {"usage_cached_tokens": s.cached_tokens, "ttft_s": s.ttft_s}
            facts.probes[name] = answer | await scrapes.moved()
    retention = ((ctx.compat.startup or {}).get("flags") or {}).get("prefix_cache_retention_interval")
    facts.hybrid, facts.hybrid_from, facts.retention_interval = _hybrid(
        facts.cache_config, t.family, retention
    )
    return facts
