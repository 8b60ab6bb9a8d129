"""Run every rule over a set of exchanges and attribute each finding (DESIGN.md, attribution).

Single tap, weaker attribution: a tap can only vouch for its own side. The caller tap decides caller
faults; the engine tap decides model, parser and engine faults. What a tap cannot decide becomes
``unknown``, and the message says which tap was missing (unless ``direct``: no gateway in between).

Dual tap: a caller-side finding that the engine side shares keeps the engine side's fault (it was
already wrong when vLLM sent it); one the engine side lacks was introduced between the taps: gateway.
An engine-side request finding the caller side lacks means the gateway broke the request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import _rules_answer, _rules_message, _rules_pairs, _rules_request, _rules_stream  # noqa: F401 - registers rules
from ._exchange import Exchange
from ._pairs import ENGINE, TapPair, pair_taps, pair_twins
from ._registry import CheckConfig, Fault, Finding, Hit, Rule, rules
from ._view import ExchangeView, build_view

__all__ = ["CheckResult", "check_exchanges", "check_view"]

_RESPONSE_FAULTS = frozenset({Fault.MODEL, Fault.PARSER, Fault.ENGINE})


@dataclass(slots=True)
class CheckResult:
    exchanges: int = 0
    findings: list[Finding] = field(default_factory=list)
    pairs: int = 0
    twins: int = 0
    taps: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    def summary(self) -> dict[str, Any]:
        return {
            "by_fault": dict(sorted(Counter(str(f.fault) for f in self.findings).items())),
            "by_rule": dict(sorted(Counter(f.rule for f in self.findings).items())),
            "by_severity": dict(sorted(Counter(str(f.severity) for f in self.findings).items())),
            "pairs": self.pairs,
            "twins": self.twins,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary(),
        }


def _finding(r: Rule, h: Hit, exchange_id: str, tap: str) -> Finding:
    evidence: dict[str, Any] = {"pointer": h.pointer}
    if h.excerpt is not None:
        evidence["excerpt"] = h.excerpt
    if h.event is not None:
        evidence["event"] = h.event
    return Finding(
        rule=r.id,
        severity=h.severity or r.severity,
        fault=h.fault or r.fault,
        message=h.message,
        exchange_id=h.exchange_id or exchange_id,
        tap=h.tap or tap,
        evidence=evidence,
    )


def check_view(view: ExchangeView, config: CheckConfig | None = None) -> list[Finding]:
    """The single-exchange rules on one view, with the rules' own faults (no attribution)."""
    ctx = config or CheckConfig()
    out: list[Finding] = []
    for r in rules("exchange"):
        if r.id in ctx.disabled:
            continue
        for h in r.func(view, ctx):
            out.append(_finding(r, h, view.id, view.tap))
    return out


def check_exchanges(exchanges: Iterable[Exchange], config: CheckConfig | None = None) -> CheckResult:
    ctx = config or CheckConfig()
    views = [build_view(ex) for ex in exchanges]
    result = CheckResult(exchanges=len(views), taps=sorted({v.tap for v in views}))
    per_view: dict[int, list[Finding]] = {id(v): check_view(v, ctx) for v in views}

    for tw in pair_twins(views):
        result.twins += 1
        for r in rules("twins"):
            if r.id not in ctx.disabled:
                per_view[id(tw.streamed)].extend(
                    _finding(r, h, tw.streamed.id, tw.streamed.tap) for h in r.func(tw, ctx)
                )

    pairs = pair_taps(views, by_fingerprint=ctx.pair_by_fingerprint)
    result.pairs = len(pairs)
    partner: dict[int, TapPair] = {}
    for p in pairs:
        partner[id(p.caller)] = p
        partner[id(p.engine)] = p

    for v in views:
        found = per_view[id(v)]
        tp = partner.get(id(v))
        if tp is None:
            _attribute_single(v, found, ctx)
        elif v is tp.caller:
            per_view[id(v)] = _attribute_caller(found, per_view[id(tp.engine)])
        else:
            per_view[id(v)] = _attribute_engine(found, per_view[id(tp.caller)])
    for p in pairs:
        for r in rules("taps"):
            if r.id not in ctx.disabled:
                per_view[id(p.caller)].extend(
                    _finding(r, h, p.caller.id, p.caller.tap) for h in r.func(p, ctx)
                )
    for v in views:
        result.findings.extend(per_view[id(v)])
    return result


def _attribute_single(v: ExchangeView, found: list[Finding], ctx: CheckConfig) -> None:
    if ctx.direct:
        return
    for f in found:
        if v.tap == ENGINE and f.fault == Fault.CALLER and f.severity != "info":
            f.fault = Fault.UNKNOWN
            f.message += " (seen at the engine tap only: caller tap missing, so a gateway is not ruled out)"
        elif v.tap != ENGINE and f.fault in _RESPONSE_FAULTS:
            f.fault = Fault.UNKNOWN
            f.message += f" (seen at the {v.tap} tap only: engine tap missing, so a gateway is not ruled out)"


def _attribute_caller(found: list[Finding], engine_found: list[Finding]) -> list[Finding]:
    """A finding both taps share is reported once, at the engine tap that decides its fault."""
    at_engine = {f.rule: f for f in engine_found}
    kept: list[Finding] = []
    for f in found:
        if f.fault in _RESPONSE_FAULTS:
            twin = at_engine.get(f.rule)
            if twin is not None:
                if not twin.message.endswith("(reached the caller too)"):
                    twin.message += " (reached the caller too)"
                continue
            f.fault = Fault.GATEWAY
            f.message += " (not at the engine tap: introduced by the gateway)"
        kept.append(f)
    return kept


def _attribute_engine(found: list[Finding], caller_found: list[Finding]) -> list[Finding]:
    """Caller-fault findings: shared with the caller side they are reported once, there; seen only
    at the engine tap, the gateway made them."""
    caller_rules = {f.rule for f in caller_found}
    kept: list[Finding] = []
    for f in found:
        if f.fault == Fault.CALLER:
            if f.rule in caller_rules:
                continue
            f.fault = Fault.GATEWAY
            f.message += " (not at the caller tap: the gateway changed the request)"
        kept.append(f)
    return kept
