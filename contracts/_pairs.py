"""Pairing: the caller and engine side of one request (dual tap), and a streamed and a non-streamed
exchange of the same request (twins).

Taps are paired by ``correlation`` (the ``x-wirecheck-id`` the caller tap injects). Gateways may drop
unknown headers, so :func:`pair_taps` can fall back to a fingerprint of the request and time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._view import ExchangeView

__all__ = ["TapPair", "TwinPair", "pair_taps", "pair_twins", "request_fingerprint"]

CALLER = "caller"
ENGINE = "engine"


@dataclass(slots=True)
class TapPair:
    caller: ExchangeView
    engine: ExchangeView
    by: str  # "correlation" | "fingerprint"


@dataclass(slots=True)
class TwinPair:
    streamed: ExchangeView
    plain: ExchangeView


def _canonical(req: dict[str, Any], drop: tuple[str, ...] = ()) -> str:
    return json.dumps({k: v for k, v in req.items() if k not in drop}, sort_keys=True, ensure_ascii=False)


def request_fingerprint(view: ExchangeView) -> str:
    """A hash of the request without transport-only fields (stream flags)."""
    text = (
        _canonical(view.req, ("stream", "stream_options"))
        if view.req
        else view.ex.request.body.decode("utf-8", "replace")
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _last_user_text(view: ExchangeView) -> str | None:
    msgs = view.req.get("messages")
    if not isinstance(msgs, list):
        return None
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            return json.dumps(m.get("content"), sort_keys=True)
    return None


def _ts(view: ExchangeView) -> float | None:
    s = view.ex.started_at
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pair_taps(
    views: list[ExchangeView], *, by_fingerprint: bool = False, window_s: float = 30.0
) -> list[TapPair]:
    """Caller/engine pairs: by correlation first, then (optionally) by request fingerprint and time."""
    pairs: list[TapPair] = []
    engines: dict[str, list[ExchangeView]] = {}
    for v in views:
        if v.tap == ENGINE and v.ex.correlation:
            engines.setdefault(v.ex.correlation, []).append(v)
    used: set[int] = set()
    unpaired_callers: list[ExchangeView] = []
    for v in views:
        if v.tap == ENGINE:
            continue
        cands = engines.get(v.ex.correlation or "", [])
        # A gateway retry sends one caller request to the engine more than once: the last one is
        # what the caller got.
        partner = next((e for e in reversed(cands) if id(e) not in used), None) if v.ex.correlation else None
        if partner is not None:
            used.add(id(partner))
            pairs.append(TapPair(v, partner, "correlation"))
        elif v.tap == CALLER:
            unpaired_callers.append(v)
    if not by_fingerprint:
        return pairs
    free = [v for v in views if v.tap == ENGINE and id(v) not in used]
    for c in unpaired_callers:
        fp, user, t = request_fingerprint(c), _last_user_text(c), _ts(c)
        best: tuple[int, float, ExchangeView] | None = None
        for e in free:
            if id(e) in used:
                continue
            te = _ts(e)
            dt = abs(te - t) if te is not None and t is not None else 0.0
            if dt > window_s:
                continue
            score = (
                2
                if request_fingerprint(e) == fp
                else 1
                if user is not None and _last_user_text(e) == user
                else 0
            )
            if score and (best is None or (score, -dt) > (best[0], -best[1])):
                best = (score, dt, e)
        if best is not None:
            used.add(id(best[2]))
            pairs.append(TapPair(c, best[2], "fingerprint"))
    return pairs


def pair_twins(views: list[ExchangeView]) -> list[TwinPair]:
    """Streamed/non-streamed pairs of the same request at the same tap (first of each)."""
    groups: dict[tuple[str, str], tuple[list[ExchangeView], list[ExchangeView]]] = {}
    for v in views:
        if not v.ok or not v.req:
            continue
        s, p = groups.setdefault((v.tap, request_fingerprint(v)), ([], []))
        (s if v.kind == "stream" else p).append(v)
    out = []
    for s, p in groups.values():
        for sv, pv in zip(s, p, strict=False):
            out.append(TwinPair(sv, pv))
    return out
