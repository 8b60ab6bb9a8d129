"""The measuring client: one chat completion sent, recorded and timed, and the figures over many.

TTFT stops at the first chunk that carries content, reasoning or tool calls, never at the role chunk
(vllm-wire.md §2); ITL is the gap between token-bearing chunks; TPOT is (e2e - TTFT) / (tokens - 1);
e2e runs to the end of the body. The timings come from the same stream assembly the checker uses.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from wirecheck.contracts import Exchange, HttpRequest, build_view
from wirecheck.record import CORRELATION_HEADER, mint_correlation, record_async, record_sync

from .._clock import SYSTEM_CLOCK, Clock

__all__ = ["REQUEST_READ_TIMEOUT_S", "Sample", "measure", "measure_sync", "percentile", "summarize", "timed"]

#: the capacity clients' read timeout (in process and on Locust workers): the longest a streamed
#: answer may stay silent; a Locust worker with no new sample for longer than this, plus slack,
#: fails its step
REQUEST_READ_TIMEOUT_S = 600.0


@dataclass(slots=True)
class Sample:
    ok: bool
    status: int | None
    e2e_s: float
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    tpot_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    error: str | None = None
    fingerprint: str | None = None
    started_s: float = 0.0
    lag_s: float = 0.0
    correlation: str = ""
    exchange: Exchange | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "status": self.status,
            "e2e_s": round(self.e2e_s, 6),
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 6),
            "tpot_s": None if self.tpot_s is None else round(self.tpot_s, 6),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "error": self.error,
            "lag_s": round(self.lag_s, 6),
            "started_s": round(self.started_s, 6),
        }

    def to_raw(self) -> dict[str, Any]:
        """Every measured value, unrounded, as it travels from a load worker to the master (all but the
        exchange, which stays with the worker)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "exchange"}

    @classmethod
    def from_raw(cls, d: dict[str, Any]) -> Sample:
        return cls(
            ok=bool(d["ok"]),
            status=d.get("status"),
            e2e_s=float(d["e2e_s"]),
            ttft_s=d.get("ttft_s"),
            itl_s=[float(x) for x in d.get("itl_s") or []],
            tpot_s=d.get("tpot_s"),
            prompt_tokens=d.get("prompt_tokens"),
            completion_tokens=d.get("completion_tokens"),
            cached_tokens=d.get("cached_tokens"),
            error=d.get("error"),
            fingerprint=d.get("fingerprint"),
            started_s=float(d.get("started_s") or 0.0),
            lag_s=float(d.get("lag_s") or 0.0),
            correlation=str(d.get("correlation") or ""),
        )


def _error_text(view: Any, ex: Exchange) -> str | None:
    if ex.error is not None:
        return f"{ex.error.kind}: {ex.error.message}"[:300]
    if view.status is not None and view.status >= 400:
        body = view.body
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return f"HTTP {view.status}: {body['error'].get('message')}"[:300]
        return f"HTTP {view.status}"
    if view.stream is not None and view.stream.error_frames:
        return f"in-band error: {json.dumps(view.stream.error_frames[0][1])[:280]}"
    if not view.ok:
        return "not a usable chat completion"
    return None


def _prepare(body: dict[str, Any], headers: dict[str, str] | None, exchange_id: str) -> Exchange:
    raw = json.dumps(body).encode()
    corr = mint_correlation()  # the caller tap keeps only ids it can verify
    hdrs = {"content-type": "application/json", CORRELATION_HEADER: corr, **(headers or {})}
    ex = Exchange(
        id=exchange_id or corr,
        tap="client",
        correlation=corr,
        request=HttpRequest("POST", "/v1/chat/completions", list(hdrs.items()), raw),
    )
    return ex


def timed(ex: Exchange, e2e: float, started: float, keep: bool = False) -> Sample:
    """The measurement of one recorded exchange: TTFT and ITL from its chunks' times, TPOT, usage,
    the error, the fingerprint. ``e2e``: seconds to the end of the body; ``started``: when it was sent
    (seconds since the epoch)."""
    view = build_view(ex)
    sample = Sample(
        ok=view.ok, status=view.status, e2e_s=e2e, correlation=ex.correlation or "", started_s=started
    )
    sample.error = _error_text(view, ex)
    usage = view.usage or {}
    sample.prompt_tokens = usage.get("prompt_tokens")
    sample.completion_tokens = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        sample.cached_tokens = details.get("cached_tokens")
    st = view.stream
    if st is not None:
        sample.fingerprint = st.system_fingerprint
        if st.first_token_ms is not None:
            sample.ttft_s = st.first_token_ms / 1000.0
        times = st.token_times
        sample.itl_s = [(b - a) / 1000.0 for a, b in itertools.pairwise(times)]
        n = sample.completion_tokens or st.token_events
        if sample.ttft_s is not None and n and n > 1:
            sample.tpot_s = max(e2e - sample.ttft_s, 0.0) / (n - 1)
    elif view.kind == "json" and isinstance(view.body, dict):
        sample.fingerprint = view.body.get("system_fingerprint")
        sample.ttft_s = e2e if view.ok else None
    if keep:
        sample.exchange = ex
    return sample


async def measure(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    keep: bool = False,
    exchange_id: str = "",
    clock: Clock = SYSTEM_CLOCK,
) -> Sample:
    """Send one chat completion and time it; never raises for HTTP or transport failures. The
    timings are the recording's; ``clock`` stamps when it was sent."""
    ex = _prepare(body, headers, exchange_id)
    started = clock.now()
    e2e = await record_async(client, ex, url, headers=ex.request.headers)
    return timed(ex, e2e, started, keep)


def measure_sync(
    client: httpx.Client, url: str, body: dict[str, Any], *, headers: dict[str, str] | None = None
) -> Sample:
    """:func:`measure` for a blocking client (a Locust worker's greenlets): the same timings."""
    ex = _prepare(body, headers, "")
    started = time.time()
    e2e = record_sync(client, ex, url, headers=ex.request.headers)
    return timed(ex, e2e, started)


def percentile(values: Iterable[float], q: float) -> float | None:
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """Percentiles of TTFT, ITL, TPOT and e2e over the successful samples, and the error count."""
    ok = [s for s in samples if s.ok]
    out: dict[str, Any] = {"requests": len(samples), "ok": len(ok), "errors": len(samples) - len(ok)}
    out["error_rate"] = round((len(samples) - len(ok)) / len(samples), 4) if samples else 0.0
    series = {
        "ttft": [s.ttft_s for s in ok if s.ttft_s is not None],
        "itl": [x for s in ok for x in s.itl_s],
        "tpot": [s.tpot_s for s in ok if s.tpot_s is not None],
        "e2e": [s.e2e_s for s in ok],
    }
    for name, xs in series.items():
        for q in (50, 90, 95, 99):
            v = percentile(xs, q)
            out[f"{name}_p{q}_s"] = None if v is None else round(v, 6)
    errs: dict[str, int] = {}
    for s in samples:
        if not s.ok:
            key = (s.error or "error").split(":")[0]
            errs[key] = errs.get(key, 0) + 1
    out["error_kinds"] = errs
    return out
